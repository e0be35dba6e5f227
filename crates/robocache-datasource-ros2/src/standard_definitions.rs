//! The definitions of ROS 2 Humble's standard message types
//! (`standard_definitions.msg`: std_msgs, geometry_msgs, sensor_msgs,
//! nav_msgs, tf2_msgs, trajectory_msgs and the rest of rosbags' Humble
//! typestore, written by `tests/fixtures/make_standard_definitions.py`),
//! for bags that carry none: rosbag2's SQLite storage before Iron stores a
//! topic's type name only. A type outside the set stays undecodable, and
//! says so.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::msg_schema::canonical_name;

const DEFINITIONS: &str = include_str!("standard_definitions.msg");
const RULE: &str = "================================================================================";

/// Each type's own section (its `MSG:` line and fields), by canonical name.
fn sections() -> &'static HashMap<String, &'static str> {
    static SECTIONS: OnceLock<HashMap<String, &'static str>> = OnceLock::new();
    SECTIONS.get_or_init(|| {
        let mut out = HashMap::new();
        for chunk in DEFINITIONS.split(RULE) {
            let body = chunk.trim_start_matches('\n');
            if let Some(name) = body.lines().next().and_then(|line| line.strip_prefix("MSG:")) {
                out.insert(canonical_name(name.trim()), body);
            }
        }
        out
    })
}

/// `type_name`'s definition in the concatenated `ros2msg` form
/// (`MessageSchema::parse`'s input): its own fields, then every other
/// standard type as a section (the parser resolves what the fields use).
/// `None` for a type outside the set.
pub(crate) fn definition(type_name: &str) -> Option<String> {
    let sections = sections();
    let root = canonical_name(type_name);
    let own = sections.get(&root)?;
    let mut text: String = own.lines().skip(1).map(|line| format!("{line}\n")).collect();
    for (name, section) in sections {
        if *name != root {
            text.push_str(RULE);
            text.push('\n');
            text.push_str(section);
            if !section.ends_with('\n') {
                text.push('\n');
            }
        }
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg_schema::MessageSchema;

    #[test]
    fn every_standard_type_parses_and_joint_state_is_as_rosbags_writes_it() {
        assert!(sections().len() >= 150, "{} types", sections().len());
        for name in sections().keys() {
            let text = definition(name).unwrap();
            MessageSchema::parse(name, &text).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let joint_state = definition("sensor_msgs/msg/JointState").unwrap();
        let parsed = MessageSchema::parse("sensor_msgs/msg/JointState", &joint_state).unwrap();
        let ours = include_str!("../../robocache-datasets/tests/fixtures/ros2/joint_state.msg");
        let theirs = MessageSchema::parse("sensor_msgs/msg/JointState", ours).unwrap();
        let names = |s: &MessageSchema| s.root().fields.iter().map(|f| f.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&parsed), names(&theirs));
        assert_eq!(names(&parsed), ["header", "name", "position", "velocity", "effort"]);
        assert!(definition("my_robot_msgs/msg/Thing").is_none());
    }
}
