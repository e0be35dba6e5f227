//! What a resample call asks for: the method of each channel group and the
//! boundary rule. Parsed from text for the CLI (`"0..3:linear,3..7:slerp-xyzw"`).

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

/// Component order of a quaternion stored in 4 channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuaternionOrder {
    /// `(x, y, z, w)`: scipy, ROS, PyBullet, robosuite.
    Xyzw,
    /// `(w, x, y, z)`: MuJoCo, Eigen's constructor, Isaac.
    Wxyz,
}

/// How the value at a target time is computed from the samples around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// Linear interpolation between the two neighbouring samples.
    Linear,
    /// The closer neighbour; a tie takes the earlier one.
    Nearest,
    /// Zero-order hold: the latest sample at or before the target.
    Previous,
    /// Spherical linear interpolation of unit quaternions in groups of 4 channels.
    Slerp { order: QuaternionOrder },
}

impl Method {
    /// True when the method only selects existing samples (defined for every dtype).
    pub const fn is_selection(self) -> bool {
        matches!(self, Method::Nearest | Method::Previous)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Method::Linear => "linear",
            Method::Nearest => "nearest",
            Method::Previous => "previous",
            Method::Slerp { order: QuaternionOrder::Xyzw } => "slerp-xyzw",
            Method::Slerp { order: QuaternionOrder::Wxyz } => "slerp-wxyz",
        })
    }
}

impl FromStr for Method {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "linear" | "lerp" => Method::Linear,
            "nearest" => Method::Nearest,
            "previous" | "zoh" | "hold" => Method::Previous,
            "slerp" | "slerp-xyzw" => Method::Slerp { order: QuaternionOrder::Xyzw },
            "slerp-wxyz" => Method::Slerp { order: QuaternionOrder::Wxyz },
            other => {
                return Err(format!(
                    "unknown method '{other}' (expected linear, nearest, previous, slerp-xyzw or slerp-wxyz)"
                ))
            }
        })
    }
}

/// What a target outside `[s_0, s_{n-1}]` gets. The valid mask is false there
/// whatever the rule.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum Boundary {
    /// The edge sample, as `numpy.interp` does.
    #[default]
    Clamp,
    /// `Linear` continues the edge segment; other methods behave as `Clamp`.
    Extrapolate,
    /// This value, in every channel (rounded to nearest-even into float
    /// dtypes; it must be exactly representable in integer dtypes).
    Fill(f64),
}

impl fmt::Display for Boundary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Boundary::Clamp => f.write_str("clamp"),
            Boundary::Extrapolate => f.write_str("extrapolate"),
            Boundary::Fill(v) => write!(f, "fill:{v}"),
        }
    }
}

impl FromStr for Boundary {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase();
        match s.as_str() {
            "clamp" => Ok(Boundary::Clamp),
            "extrapolate" => Ok(Boundary::Extrapolate),
            _ => match s.strip_prefix("fill:").or_else(|| s.strip_prefix("fill=")) {
                Some(v) => {
                    v.parse::<f64>().map(Boundary::Fill).map_err(|_| format!("fill value '{v}' is not a number"))
                }
                None => Err(format!("unknown boundary '{s}' (expected clamp, extrapolate or fill:VALUE)")),
            },
        }
    }
}

/// One method applied to the channels `range` (`start..end`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelGroup {
    pub range: Range<usize>,
    pub method: Method,
}

/// The method of every channel: one for all, or a list of groups that must
/// cover `0..D` in order without gaps or overlaps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChannelSpec {
    /// One method for every channel.
    All(Method),
    /// Groups in channel order.
    Groups(Vec<ChannelGroup>),
}

impl Default for ChannelSpec {
    fn default() -> Self {
        ChannelSpec::All(Method::Linear)
    }
}

impl From<Method> for ChannelSpec {
    fn from(method: Method) -> Self {
        ChannelSpec::All(method)
    }
}

impl ChannelSpec {
    /// The groups for `channels` channels, checked: contiguous from 0 to
    /// `channels`, non-empty, and slerp groups a multiple of 4 wide.
    pub fn resolve(&self, channels: usize) -> Result<Vec<ChannelGroup>, String> {
        let groups = match self {
            ChannelSpec::All(method) => vec![ChannelGroup { range: 0..channels, method: *method }],
            ChannelSpec::Groups(groups) => groups.clone(),
        };
        if groups.is_empty() {
            return Err("has no groups".into());
        }
        let mut next = 0;
        for group in &groups {
            let ChannelGroup { range, method } = group;
            if range.start != next {
                return Err(format!(
                    "group {}..{} should start at channel {next} (groups must cover 0..{channels} in order, without gaps or overlaps)",
                    range.start, range.end
                ));
            }
            if range.end <= range.start {
                return Err(format!("group {}..{} is empty", range.start, range.end));
            }
            if matches!(method, Method::Slerp { .. }) && range.len() % 4 != 0 {
                return Err(format!(
                    "slerp group {}..{} is {} channels wide; quaternions need a multiple of 4",
                    range.start,
                    range.end,
                    range.len()
                ));
            }
            next = range.end;
        }
        if next != channels {
            return Err(format!("covers channels 0..{next}, but the data has {channels} channels"));
        }
        Ok(groups)
    }
}

impl fmt::Display for ChannelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChannelSpec::All(method) => write!(f, "{method}"),
            ChannelSpec::Groups(groups) => {
                for (i, g) in groups.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{}..{}:{}", g.range.start, g.range.end, g.method)?;
                }
                Ok(())
            }
        }
    }
}

impl FromStr for ChannelSpec {
    type Err = String;

    /// `"linear"` for one method, or `"0..3:linear,3..7:slerp-xyzw,7..8:previous"`.
    fn from_str(s: &str) -> Result<Self, String> {
        if !s.contains(':') {
            return s.parse().map(ChannelSpec::All);
        }
        let groups = s
            .split(',')
            .map(|part| {
                let (range, method) =
                    part.split_once(':').ok_or_else(|| format!("group '{part}' is not START..END:METHOD"))?;
                let (start, end) =
                    range.split_once("..").ok_or_else(|| format!("range '{range}' is not START..END"))?;
                let parse = |v: &str| {
                    v.trim().parse::<usize>().map_err(|_| format!("'{v}' in '{part}' is not a channel index"))
                };
                Ok(ChannelGroup { range: parse(start)?..parse(end)?, method: method.parse()? })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(ChannelSpec::Groups(groups))
    }
}

/// Everything a resample needs besides the arrays.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ResampleSpec {
    /// The method of each channel.
    pub channels: ChannelSpec,
    /// What targets outside a row's time range get.
    pub boundary: Boundary,
    /// Skip the check that source times are finite and strictly increasing.
    /// Results for times that are not are unspecified, but never out of bounds.
    pub trusted: bool,
}

impl ResampleSpec {
    /// A spec with one method for every channel and the default boundary.
    pub fn new(method: Method) -> Self {
        ResampleSpec { channels: ChannelSpec::All(method), ..Default::default() }
    }

    /// Replaces the boundary rule.
    pub fn with_boundary(mut self, boundary: Boundary) -> Self {
        self.boundary = boundary;
        self
    }

    /// Replaces the channel spec.
    pub fn with_channels(mut self, channels: ChannelSpec) -> Self {
        self.channels = channels;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print_round_trip() {
        let spec: ChannelSpec = "0..3:linear,3..7:slerp-wxyz,7..8:previous".parse().unwrap();
        assert_eq!(spec.to_string(), "0..3:linear,3..7:slerp-wxyz,7..8:previous");
        assert_eq!(spec.resolve(8).unwrap().len(), 3);
        assert!(spec.resolve(9).unwrap_err().contains("0..8"));
        let gap: ChannelSpec = "0..3:linear,4..8:linear".parse().unwrap();
        assert!(gap.resolve(8).unwrap_err().contains("start at channel 3"));
        let odd: ChannelSpec = "0..3:slerp".parse().unwrap();
        assert!(odd.resolve(3).unwrap_err().contains("multiple of 4"));
        assert_eq!("fill:-1.5".parse::<Boundary>(), Ok(Boundary::Fill(-1.5)));
        assert!("fill:x".parse::<Boundary>().is_err());
        assert!("cubic".parse::<Method>().is_err());
    }
}
