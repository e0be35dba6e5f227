//! The default channel kind of a stream from its key, dtype and shape: the
//! inference every layout shares before its own rules.

use crate::model::{ChannelKind, StreamKind};

/// What the default-kind rules of a layout look at.
#[derive(Debug)]
pub struct StreamShape<'a> {
    /// The stream's key in its file.
    pub key: &'a str,
    /// Its element type.
    pub dtype: robocache_cpu::DType,
    /// Its shape per step.
    pub step_shape: &'a [usize],
}

impl StreamShape<'_> {
    /// The inference shared by the layouts: camera-like arrays are images,
    /// bools are discrete, `*quat*` keys with 4 channels are quaternions
    /// (xyzw, as robosuite and RLDS store them), the rest is continuous.
    pub fn common_kind(&self) -> StreamKind {
        let last = self.key.rsplit('/').next().unwrap_or(self.key);
        let channels: usize = self.step_shape.iter().product();
        let kind =
            if self.step_shape.len() >= 2 || last.contains("image") || last.contains("rgb") || last.contains("depth") {
                ChannelKind::Image
            } else if self.dtype == robocache_cpu::DType::Bool
                || matches!(last, "dones" | "rewards" | "reward" | "discount" | "is_first" | "is_last" | "is_terminal")
            {
                ChannelKind::Discrete
            } else if last.contains("quat") && channels.is_multiple_of(4) && channels > 0 {
                ChannelKind::Quaternion(robocache_cpu::QuaternionOrder::Xyzw)
            } else {
                ChannelKind::Continuous
            };
        StreamKind::All(kind)
    }
}
