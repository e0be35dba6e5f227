//! Service events as rosbag2 records them (ROS 2 Jazzy's service
//! introspection): a topic `/<service>/_service_event` of type
//! `pkg/srv/Name_Event`, whose definition in the bag is the service's own
//! `.srv` text (request fields, a `---` line, response fields, then the
//! sections of the types they use). On the wire a message is the event type
//! rosidl generates for the service:
//!
//! ```text
//! service_msgs/ServiceEventInfo info      # event_type, stamp, client_gid, sequence_number
//! pkg/Name_Request[<=1] request           # empty but in a request event
//! pkg/Name_Response[<=1] response         # empty but in a response event
//! ```
//!
//! [`event_definition`] writes that definition as `ros2msg` text, so the
//! one parser and decoder read service events as any message.

use super::msg_schema::canonical_name;

const SEPARATOR: &str = "================================================================================";

/// The `ros2msg` text of `root`'s event message where `root` is a service
/// event type (`pkg/srv/Name_Event`) and `text` a `.srv` definition (it has
/// a `---` line before any type section); `None` otherwise.
pub(crate) fn event_definition(root: &str, text: &str) -> Option<String> {
    let name = canonical_name(root);
    let (package, rest) = name.split_once("/srv/")?;
    let service = rest.strip_suffix("_Event")?;
    let is_separator = |line: &str| line.trim().len() >= 3 && line.trim().chars().all(|c| c == '=');
    let (mut request, mut response, mut tail) = (Vec::new(), Vec::new(), Vec::new());
    let mut part = 0;
    for line in text.lines() {
        match part {
            0 if is_separator(line) => return None, // a message's sections, no `---`: not a service
            0 if line.trim() == "---" => part = 1,
            0 => request.push(line),
            1 if is_separator(line) => {
                part = 2;
                tail.push(line);
            }
            1 => response.push(line),
            _ => tail.push(line),
        }
    }
    if part == 0 {
        return None;
    }
    let section = |name: &str, lines: &[&str]| format!("{SEPARATOR}\nMSG: {name}\n{}\n", lines.join("\n"));
    let mut out = format!(
        "service_msgs/ServiceEventInfo info\n{package}/{service}_Request[<=1] request\n\
         {package}/{service}_Response[<=1] response\n"
    );
    out.push_str(&section(
        "service_msgs/ServiceEventInfo",
        &["uint8 event_type", "builtin_interfaces/Time stamp", "char[16] client_gid", "int64 sequence_number"],
    ));
    out.push_str(&section("builtin_interfaces/Time", &["int32 sec", "uint32 nanosec"]));
    out.push_str(&section(&format!("{package}/{service}_Request"), &request));
    out.push_str(&section(&format!("{package}/{service}_Response"), &response));
    for line in tail {
        out.push_str(line);
        out.push('\n');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg_schema::MessageSchema;

    #[test]
    fn a_srv_text_is_read_as_its_event_message() {
        let text =
            event_definition("example_interfaces/srv/AddTwoInts_Event", "int64 a\nint64 b\n---\nint64 sum\n").unwrap();
        let schema = MessageSchema::parse("example_interfaces/srv/AddTwoInts_Event", &text).unwrap();
        let fields: Vec<&str> = schema.root().fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(fields, ["info", "request", "response"]);
        assert!(event_definition("pkg/msg/Thing_Event", "int64 a\n---\nint64 b\n").is_none(), "a message type");
        assert!(event_definition("pkg/srv/Thing_Event", "int64 a\n").is_none(), "no `---`");
    }
}
