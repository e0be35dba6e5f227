//! Transforms between two frames through the tf tree of a bag: `/tf`
//! (`tf2_msgs/TFMessage`, each edge a timeline) and `/tf_static` (edges
//! that hold for the whole recording).
//!
//! `parent → child` at time `t` composes the edges from the two frames up to
//! their common ancestor: each dynamic edge interpolated at `t` (translation
//! linear, rotation slerped; held at its first or last value outside its
//! range), each static edge as given. A pose is 7 numbers: translation
//! `x y z`, then the rotation quaternion `x y z w` (ROS's order).

use std::collections::HashMap;

use super::cdr::Value;
use super::msg_schema::MessageSchema;

/// A rigid transform: translation and unit quaternion `[x, y, z, w]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Pose {
    pub(crate) translation: [f64; 3],
    pub(crate) rotation: [f64; 4],
}

impl Pose {
    const IDENTITY: Pose = Pose { translation: [0.0; 3], rotation: [0.0, 0.0, 0.0, 1.0] };

    /// `self ∘ other`: `other` expressed in `self`'s parent frame.
    fn then(&self, other: &Pose) -> Pose {
        let rotated = rotate(self.rotation, other.translation);
        Pose {
            translation: [
                self.translation[0] + rotated[0],
                self.translation[1] + rotated[1],
                self.translation[2] + rotated[2],
            ],
            rotation: multiply(self.rotation, other.rotation),
        }
    }

    fn inverse(&self) -> Pose {
        let conjugate = [-self.rotation[0], -self.rotation[1], -self.rotation[2], self.rotation[3]];
        let t = rotate(conjugate, self.translation);
        Pose { translation: [-t[0], -t[1], -t[2]], rotation: conjugate }
    }

    pub(crate) fn numbers(&self) -> [f64; 7] {
        let [x, y, z] = self.translation;
        let [qx, qy, qz, qw] = self.rotation;
        [x, y, z, qx, qy, qz, qw]
    }
}

fn multiply(a: [f64; 4], b: [f64; 4]) -> [f64; 4] {
    let [ax, ay, az, aw] = a;
    let [bx, by, bz, bw] = b;
    [
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    ]
}

fn rotate(q: [f64; 4], v: [f64; 3]) -> [f64; 3] {
    let p = multiply(multiply(q, [v[0], v[1], v[2], 0.0]), [-q[0], -q[1], -q[2], q[3]]);
    [p[0], p[1], p[2]]
}

fn normalized(q: [f64; 4]) -> [f64; 4] {
    let norm = q.iter().map(|c| c * c).sum::<f64>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return [0.0, 0.0, 0.0, 1.0];
    }
    q.map(|c| c / norm)
}

fn slerp(a: [f64; 4], b: [f64; 4], t: f64) -> [f64; 4] {
    let (a, mut b) = (normalized(a), normalized(b));
    let mut dot: f64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
    if dot < 0.0 {
        b = b.map(|c| -c);
        dot = -dot;
    }
    if dot > 1.0 - 1e-12 {
        return normalized(std::array::from_fn(|i| a[i] + t * (b[i] - a[i])));
    }
    let theta = dot.clamp(-1.0, 1.0).acos();
    let (wa, wb) = (((1.0 - t) * theta).sin() / theta.sin(), (t * theta).sin() / theta.sin());
    normalized(std::array::from_fn(|i| wa * a[i] + wb * b[i]))
}

/// One edge: its parent and its poses over time (sorted), or one static pose.
#[derive(Debug, Default)]
struct Edge {
    parent: String,
    /// `(time s, pose)`, sorted by time.
    timeline: Vec<(f64, Pose)>,
    fixed: Option<Pose>,
}

impl Edge {
    fn at(&self, t: f64) -> Pose {
        if let Some(pose) = self.fixed {
            return pose;
        }
        let line = &self.timeline;
        let after = line.partition_point(|(s, _)| *s <= t);
        match (after.checked_sub(1).map(|i| &line[i]), line.get(after)) {
            (Some((_, pose)), None) | (None, Some((_, pose))) => *pose,
            (Some((s0, p0)), Some((s1, p1))) => {
                let w = if s1 > s0 { (t - s0) / (s1 - s0) } else { 0.0 };
                Pose {
                    translation: std::array::from_fn(|i| {
                        p0.translation[i] + w * (p1.translation[i] - p0.translation[i])
                    }),
                    rotation: slerp(p0.rotation, p1.rotation, w),
                }
            }
            (None, None) => Pose::IDENTITY,
        }
    }
}

/// The tf tree of one bag.
#[derive(Debug, Default)]
pub(crate) struct TfTree {
    /// By child frame.
    edges: HashMap<String, Edge>,
}

fn number(schema: &MessageSchema, value: &Value<'_>, path: &str) -> Option<f64> {
    let mut out = Vec::new();
    value.get(schema, path)?.numbers(&mut out);
    (out.len() == 1).then(|| out[0])
}

impl TfTree {
    /// Adds the transforms of one `tf2_msgs/TFMessage` (`time_s`: each
    /// transform's header stamp in nanoseconds, as seconds of the episode).
    pub(crate) fn add(
        &mut self,
        schema: &MessageSchema,
        message: &Value<'_>,
        is_static: bool,
        time_s: impl Fn(i128) -> f64,
    ) -> Result<(), String> {
        let Some(Value::List(transforms)) = message.get(schema, "transforms") else {
            return Err("no `transforms` list (not a tf2_msgs/TFMessage)".into());
        };
        for transform in transforms {
            let text = |path: &str| transform.get(schema, path).and_then(Value::as_str).map(str::to_owned);
            let (Some(parent), Some(child)) = (text("header.frame_id"), text("child_frame_id")) else {
                return Err("a transform without `header.frame_id` and `child_frame_id`".into());
            };
            let read = |path: &str| number(schema, transform, path).ok_or_else(|| format!("no `{path}` number"));
            let pose = Pose {
                translation: [
                    read("transform.translation.x")?,
                    read("transform.translation.y")?,
                    read("transform.translation.z")?,
                ],
                rotation: normalized([
                    read("transform.rotation.x")?,
                    read("transform.rotation.y")?,
                    read("transform.rotation.z")?,
                    read("transform.rotation.w")?,
                ]),
            };
            let stamp_ns = transform.header_stamp_ns(schema).unwrap_or(0);
            let edge = self.edges.entry(child.trim_start_matches('/').to_owned()).or_default();
            edge.parent = parent.trim_start_matches('/').to_owned();
            if is_static {
                edge.fixed = Some(pose);
            } else {
                edge.timeline.push((time_s(stamp_ns), pose));
            }
        }
        Ok(())
    }

    /// Sorts each edge's timeline (messages may come out of order).
    pub(crate) fn finish(&mut self) {
        for edge in self.edges.values_mut() {
            edge.timeline.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
    }

    /// The frames from `frame` up to its root, `frame` first.
    fn chain(&self, frame: &str) -> Vec<String> {
        let mut out = vec![frame.to_owned()];
        while let Some(edge) = self.edges.get(out.last().map(String::as_str).unwrap_or_default()) {
            if out.contains(&edge.parent) || out.len() > self.edges.len() {
                break; // a loop in the tree: stop at its first repeat
            }
            out.push(edge.parent.clone());
        }
        out
    }

    /// `frame`'s pose in `ancestor` at `t` (`frame` below `ancestor`).
    fn up_to(&self, frame: &str, ancestor: &str, t: f64) -> Pose {
        let mut pose = Pose::IDENTITY;
        let mut at = frame.to_owned();
        while at != ancestor {
            let Some(edge) = self.edges.get(&at) else { break };
            pose = edge.at(t).then(&pose);
            at = edge.parent.clone();
        }
        pose
    }

    /// Checks that `parent` and `child` are connected.
    pub(crate) fn check(&self, parent: &str, child: &str) -> Result<(), String> {
        let (up, down) = (self.chain(parent), self.chain(child));
        if up.iter().any(|f| down.contains(f)) {
            return Ok(());
        }
        let frames: std::collections::BTreeSet<&str> =
            self.edges.iter().flat_map(|(c, e)| [c.as_str(), e.parent.as_str()]).collect();
        Err(format!(
            "frames `{parent}` and `{child}` are not connected in the tf tree (frames: {})",
            frames.into_iter().collect::<Vec<_>>().join(", ")
        ))
    }

    /// `child`'s pose in `parent` at `t`.
    pub(crate) fn lookup(&self, parent: &str, child: &str, t: f64) -> Pose {
        let up = self.chain(parent);
        let down = self.chain(child);
        let common = down.iter().find(|f| up.contains(f)).cloned().unwrap_or_default();
        let child_in_common = self.up_to(child, &common, t);
        let parent_in_common = self.up_to(parent, &common, t);
        parent_in_common.inverse().then(&child_in_common)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: [f64; 7], b: [f64; 7]) {
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() < 1e-12, "{a:?} != {b:?}");
        }
    }

    #[test]
    fn poses_compose_and_invert() {
        // 90° about z, then a step along x: lands on +y.
        let quarter = [0.0, 0.0, std::f64::consts::FRAC_1_SQRT_2, std::f64::consts::FRAC_1_SQRT_2];
        let a = Pose { translation: [1.0, 0.0, 0.0], rotation: quarter };
        let b = Pose { translation: [1.0, 0.0, 0.0], rotation: [0.0, 0.0, 0.0, 1.0] };
        close(a.then(&b).numbers(), [1.0, 1.0, 0.0, 0.0, 0.0, quarter[2], quarter[3]]);
        close(a.then(&a.inverse()).numbers(), Pose::IDENTITY.numbers());
    }

    #[test]
    fn a_lookup_goes_through_the_common_ancestor_and_interpolates() {
        let mut tree = TfTree::default();
        let pose = |x: f64| Pose { translation: [x, 0.0, 0.0], rotation: [0.0, 0.0, 0.0, 1.0] };
        tree.edges.insert(
            "base".into(),
            Edge { parent: "world".into(), timeline: vec![(0.0, pose(0.0)), (1.0, pose(2.0))], fixed: None },
        );
        tree.edges
            .insert("camera".into(), Edge { parent: "base".into(), timeline: Vec::new(), fixed: Some(pose(0.5)) });
        tree.edges
            .insert("table".into(), Edge { parent: "world".into(), timeline: Vec::new(), fixed: Some(pose(3.0)) });
        close(tree.lookup("world", "camera", 0.25).numbers(), pose(1.0).numbers());
        // camera in table: through world.
        close(tree.lookup("table", "camera", 1.0).numbers(), pose(-0.5).numbers());
        // Held outside the edge's range.
        close(tree.lookup("world", "camera", 5.0).numbers(), pose(2.5).numbers());
        assert!(tree.check("world", "nowhere").unwrap_err().contains("not connected"));
    }
}
