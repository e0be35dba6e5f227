//! The plan of every mapped stream: which bag and topic it reads, and
//! what it takes from each message (`extract::plan`, from the topic's
//! first message).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::bag_file::BagFile;
use super::extract::{self, Extract, StreamPlan};
use super::{bag_error, cdr, first_messages, BagMapping};
use robocache_datasource::{Error, Result};

/// The plan of every mapped stream, from the first bag holding its topic.
pub(super) fn plans(
    root: &Path,
    files: &[PathBuf],
    bags: &[Arc<dyn BagFile>],
    mapping: &BagMapping,
) -> Result<Vec<StreamPlan>> {
    // Each topic stream's bag (the first with messages on it) and topic.
    let mut sources: Vec<Option<(usize, usize)>> = Vec::with_capacity(mapping.streams.len());
    for (key, stream) in &mapping.streams {
        if stream.transform.is_some() {
            sources.push(None);
            continue;
        }
        let found = bags.iter().enumerate().find_map(|(b, bag)| {
            bag.topics().iter().position(|t| t.name == stream.topic && t.messages > 0).map(|t| (b, t))
        });
        let Some((b, topic)) = found else {
            return Err(Error::Invalid(format!(
                "{}: the bag mapping's stream `{key}`: no bag has messages on topic `{}`",
                root.display(),
                stream.topic
            )));
        };
        let info = &bags[b].topics()[topic];
        if let Err(problem) = &info.schema {
            return Err(bag_error(&files[b], Some(&info.name), None, problem.clone()));
        }
        sources.push(Some((b, topic)));
    }
    // The first message of every mapped topic, one read of each bag.
    let mut firsts: HashMap<(usize, usize), cdr::Value<'static>> = HashMap::new();
    for (b, (bag, file)) in bags.iter().zip(files).enumerate() {
        let mut wanted: Vec<usize> = sources.iter().flatten().filter(|(of, _)| *of == b).map(|(_, t)| *t).collect();
        wanted.sort_unstable();
        wanted.dedup();
        if !wanted.is_empty() {
            firsts.extend(first_messages(file, bag.as_ref(), &wanted)?.into_iter().map(|(t, value)| ((b, t), value)));
        }
    }
    let mut out = Vec::with_capacity(mapping.streams.len());
    for ((key, stream), source) in mapping.streams.iter().zip(sources) {
        let Some((b, topic)) = source else {
            if !bags.iter().any(|b| b.topics().iter().any(|t| t.name == extract::TF_TOPIC && t.messages > 0)) {
                return Err(Error::Invalid(format!(
                    "{}: the bag mapping's stream `{key}`: a transform is read at each `/tf` message, and no bag has any",
                    root.display()
                )));
            }
            let frames =
                stream.transform.as_ref().ok_or_else(|| Error::Invalid(format!("stream `{key}`: no topic")))?;
            out.push(
                extract::transform_plan(key, stream, frames).map_err(|p| {
                    Error::Invalid(format!("{}: the bag mapping's stream `{key}`: {p}", root.display()))
                })?,
            );
            continue;
        };
        let (file, info) = (&files[b], &bags[b].topics()[topic]);
        let schema = info.schema.as_ref().map_err(|p| bag_error(file, Some(&info.name), None, p.clone()))?;
        let Some(value) = firsts.get(&(b, topic)) else {
            let problem = match extract::is_image_type(&info.type_name) {
                Some(Extract::CompressedVideo) => "no message of it is a key frame (an IDR or IRAP picture)",
                _ => "its messages could not be read",
            };
            return Err(bag_error(file, Some(&info.name), None, problem));
        };
        let plan = extract::plan(key, stream, &info.type_name, schema, value)
            .map_err(|p| bag_error(file, Some(&info.name), Some(0), format!("stream `{key}`: {p}")))?;
        out.push(plan);
    }
    Ok(out)
}
