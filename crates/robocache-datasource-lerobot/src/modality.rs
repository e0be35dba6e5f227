//! GR00T's flavour of LeRobot v2.0 (NVIDIA Isaac-GR00T's demo data and the
//! roots its tools write): a `meta/modality.json` beside `info.json` says
//! which parts of the root GR00T reads. Its `video` section names the
//! cameras (`"ego_view": {"original_key": "observation.images.ego_view"}`;
//! without `original_key`, `observation.images.<name>`). `info.json` may
//! declare other video features whose files the root does not hold (the
//! demo data declares `observation.images.egoview`, 800x1280, and ships no
//! video of it): those are left out of the streams and listed under the
//! dataset's `ignored` metadata, as GR00T leaves them out.

use std::collections::BTreeSet;
use std::path::Path;

use robocache_storage::Storage;
use serde_json::Value;

use robocache_datasource::{Error, Result};

/// The file, relative to the root.
pub(crate) const MODALITY: &str = "meta/modality.json";

/// The video features `meta/modality.json` names, or `None` where the root
/// has no such file (a LeRobot root as LeRobot writes it).
pub(crate) fn named_videos(storage: &Storage, root: &Path) -> Result<Option<BTreeSet<String>>> {
    let path = root.join(MODALITY);
    if !storage.is_file(&path)? {
        return Ok(None);
    }
    let text = storage.read_to_string(&path)?;
    let layout = |problem: String| Error::Layout { file: path.clone(), path: "video".into(), problem };
    let doc: Value = serde_json::from_str(&text).map_err(|e| layout(format!("not JSON: {e}")))?;
    let Some(video) = doc.get("video") else { return Ok(Some(BTreeSet::new())) };
    let video = video.as_object().ok_or_else(|| layout("is not an object of cameras".into()))?;
    let mut named = BTreeSet::new();
    for (name, camera) in video {
        let key = match camera.get("original_key") {
            Some(Value::String(key)) => key.clone(),
            Some(other) => return Err(layout(format!("`{name}.original_key` is {other}, not a feature name"))),
            None => format!("observation.images.{name}"),
        };
        named.insert(key);
    }
    Ok(Some(named))
}

/// Why a video feature is left out.
pub(crate) const NOT_NAMED: &str =
    "a video feature GR00T's meta/modality.json does not name: GR00T reads only the cameras it names";
