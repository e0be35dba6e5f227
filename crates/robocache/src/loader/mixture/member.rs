//! A dataset of a mixture: its loader, weight, name, and where each
//! mixture key's values come from in it ([`MemberKey`]).

use std::sync::Arc;

use crate::loader::Loader;

/// One dataset of a mixture: its loader (built with its own streams and
/// windows; its batch size, shuffling and sharding are the mixture's) and
/// its streams' names in the mixture.
pub struct MixtureMember {
    /// Its name, in errors and in the batch.
    pub name: String,
    /// The loader that reads it (shared: a Python `Loader` object may be
    /// a member too).
    pub loader: Arc<Loader>,
    /// Its weight (see [`MixtureWeights`]).
    pub weight: f64,
    /// `(name in the mixture, where its values come from)`: the streams it gives.
    pub keys: Vec<(String, MemberKey)>,
}

/// Where a mixture stream's values come from in one dataset.
#[derive(Clone, Debug, PartialEq)]
pub enum MemberKey {
    /// One of its loader's streams.
    Stream(String),
    /// Several of its loader's streams side by side along their last
    /// dimension (a stream without one counts as width 1): each must have
    /// the dtype, steps and other dimensions of the first and its mask kind.
    /// A step is padding where any part's is.
    Concat(Vec<String>),
    /// The same row `[D]` at every step, valid throughout: a key this
    /// dataset lacks whose value is known (a fixed gripper, a control-mode
    /// flag). Its dtype is the other datasets' (f32 where none gives it).
    Constant(Vec<f64>),
}

impl MemberKey {
    /// The loader streams it reads.
    pub fn streams(&self) -> &[String] {
        match self {
            MemberKey::Stream(name) => std::slice::from_ref(name),
            MemberKey::Concat(names) => names,
            MemberKey::Constant(_) => &[],
        }
    }
}

impl From<&str> for MemberKey {
    fn from(stream: &str) -> Self {
        MemberKey::Stream(stream.to_owned())
    }
}

impl std::fmt::Debug for MixtureMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MixtureMember").field("name", &self.name).field("weight", &self.weight).finish_non_exhaustive()
    }
}

impl MixtureMember {
    /// Where its values of mixture key `name` come from.
    pub(super) fn key(&self, name: &str) -> Option<&MemberKey> {
        self.keys.iter().find(|(mixed, _)| mixed == name).map(|(_, key)| key)
    }
}
