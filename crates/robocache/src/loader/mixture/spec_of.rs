//! [`MixtureLoader::spec`]: the [`LoaderSpec`] of one member as the
//! mixture trained it — the member's own streams, clock, frames and
//! statistics (what the robot pushes), and the mixture's streams as the
//! member fills them (names, the widest last dimension, `dim_is_pad`,
//! concatenations, constants, streams it lacks) with its group's merged
//! statistics — so a live window of it equals the member's rows of the
//! mixture's batches ([`crate::live`]).

use super::{MemberKey, MixtureLoader};
use crate::loader::{invalid, Normalization};
use crate::spec::{LoaderSpec, SpecMixture, SpecMixtureStream, SpecSource};
use crate::Result;

impl MixtureLoader {
    /// The spec of member `member` (an index into [`MixtureLoader::members`])
    /// as the mixture trained it (module docs). `statistics`: the merged
    /// statistics of the member's normalisation group
    /// ([`MixtureLoader::statistics`]) the training code normalized with,
    /// recorded in the spec, or none. The mixture's streams' widths are
    /// its batches' (found with the first batch, as the batches find them).
    pub fn spec(&self, member: usize, statistics: Option<Normalization>) -> Result<LoaderSpec> {
        let of = self
            .members
            .get(member)
            .ok_or_else(|| invalid(format!("the mixture has no member {member} (it has {})", self.members.len())))?;
        let mut spec = of.loader.spec().map_err(|e| invalid(format!("dataset `{}`: {e}", of.name)))?;
        let none: Vec<Option<crate::windows::WindowBatch>> = (0..self.members.len()).map(|_| None).collect();
        let shapes = self.key_shapes(&none)?;
        let mut streams = Vec::with_capacity(self.config.streams.len());
        for (name, shape) in self.config.streams.iter().zip(shapes.iter()) {
            let source = match of.key(name) {
                Some(MemberKey::Stream(own)) => SpecSource::Stream { stream: own.clone() },
                Some(MemberKey::Concat(parts)) => SpecSource::Concat { streams: parts.clone() },
                Some(MemberKey::Constant(values)) => SpecSource::Constant { values: values.clone() },
                None => SpecSource::Absent,
            };
            streams.push(SpecMixtureStream {
                name: name.clone(),
                source,
                dtype: shape.dtype.name().to_owned(),
                step_shape: shape.body[1..].to_vec(),
                width: shape.widest,
            });
        }
        spec.mixture = Some(SpecMixture { member: of.name.clone(), streams, statistics });
        spec.check()?;
        Ok(spec)
    }
}
