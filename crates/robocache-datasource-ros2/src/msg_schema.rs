//! ROS 2 message definitions (`ros2msg` text), as a bag carries them: the
//! MCAP schema of a channel, or rosbag2's `message_definitions` table.
//!
//! The text is the root type's fields, then each type it uses after a line
//! of `=` and a `MSG: pkg/Type` line:
//!
//! ```text
//! std_msgs/Header header
//! string[] name
//! float64[] position
//! ================================================================================
//! MSG: std_msgs/Header
//! builtin_interfaces/Time stamp
//! string frame_id
//! ```
//!
//! A field is `TYPE NAME [DEFAULT]`; `TYPE` is a primitive, `string<=N`, or
//! a message (`pkg/Type`, `pkg/msg/Type`, `Type` of the same package,
//! `Header` for `std_msgs/Header`), followed by `[N]` (fixed array), `[]`
//! (sequence) or `[<=N]` (bounded sequence). `TYPE NAME=VALUE` lines are
//! constants (not in the wire format) and are skipped; `#` starts a comment.
//!
//! - **Empty types** (`std_msgs/Empty`) get the one field rosidl gives
//!   them, `uint8 structure_needs_at_least_one_member`: one byte on the
//!   wire, as rosidl serialises them and `rosbags` reads them.
//! - **Bounds, in time linear in the definition**: at most [`MAX_TYPES`]
//!   types, fixed arrays of at most 2^24 elements, and types nested at most
//!   [`MAX_NESTING`] deep. One memoised walk checks that no type contains
//!   itself and finds each type's fewest bytes on the wire, which the CDR
//!   reader checks every count against.

use std::collections::HashMap;
use std::sync::Arc;

/// A primitive type of the wire format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Primitive {
    Bool,
    /// `byte`, `char` and `uint8`: one unsigned byte.
    U8,
    I8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    String,
    /// UTF-16 code units (`wstring`).
    WString,
}

impl Primitive {
    fn parse(name: &str) -> Option<Primitive> {
        Some(match name {
            "bool" => Primitive::Bool,
            "byte" | "char" | "uint8" => Primitive::U8,
            "int8" => Primitive::I8,
            "int16" => Primitive::I16,
            "uint16" => Primitive::U16,
            "int32" => Primitive::I32,
            "uint32" => Primitive::U32,
            "int64" => Primitive::I64,
            "uint64" => Primitive::U64,
            "float32" => Primitive::F32,
            "float64" => Primitive::F64,
            "string" => Primitive::String,
            "wstring" => Primitive::WString,
            _ => return None,
        })
    }

    /// Bytes of one value on the wire (and its alignment); strings: their length prefix.
    pub(crate) fn size(self) -> usize {
        match self {
            Primitive::Bool | Primitive::U8 | Primitive::I8 => 1,
            Primitive::I16 | Primitive::U16 => 2,
            Primitive::I32 | Primitive::U32 | Primitive::F32 | Primitive::String | Primitive::WString => 4,
            Primitive::I64 | Primitive::U64 | Primitive::F64 => 8,
        }
    }
}

/// What one field holds, before its arity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FieldType {
    Primitive(Primitive),
    /// A message type: its index in [`MessageSchema::types`].
    Message(usize),
}

/// One value, a fixed array, or a sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arity {
    One,
    Fixed(usize),
    /// Bounded (`[<=N]`) or not (`[]`); a count on the wire.
    Sequence(Option<usize>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Field {
    pub(crate) name: String,
    pub(crate) ty: FieldType,
    pub(crate) arity: Arity,
}

/// One message type: its name (`std_msgs/Header`) and fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MessageType {
    pub(crate) name: String,
    pub(crate) fields: Vec<Field>,
}

/// A root message type and every type it uses; `types[0]` is the root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MessageSchema {
    pub(crate) types: Vec<MessageType>,
    /// Per type: the fewest bytes one value takes on the wire (without
    /// padding); 0 for a type the root does not use.
    min_sizes: Vec<usize>,
    /// Per type: whether it holds only numbers of a fixed count (no
    /// sequence or string anywhere below it).
    fixed_numeric: Vec<bool>,
    /// The root's name and the text it was parsed from (`parse` of these
    /// gives this schema again): what a live decoder of the topic needs.
    definition: (String, Arc<str>),
}

/// The field rosidl gives a type without fields (one byte on the wire).
pub(crate) const EMPTY_TYPE_FIELD: &str = "structure_needs_at_least_one_member";

/// `pkg/msg/Type` and `pkg/Type` as `pkg/Type`.
pub(crate) fn canonical_name(name: &str) -> String {
    let parts: Vec<&str> = name.trim().split('/').collect();
    match parts.as_slice() {
        [package, "msg", kind] => format!("{package}/{kind}"),
        _ => name.trim().to_owned(),
    }
}

/// The most fields, types and elements of a fixed array a definition may
/// declare: a definition is text from a file, and a fixed array of 10^12
/// must be an error, not an allocation.
const MAX_FIXED_ARRAY: usize = 1 << 24;
pub(crate) const MAX_TYPES: usize = 4096;
/// The deepest nesting of message types (a type's field of a type of a
/// field ...); ROS's own types nest under 10 deep. It bounds every walk of a
/// definition and of a decoded message, so none can run out of stack.
pub(crate) const MAX_NESTING: usize = 64;

impl MessageSchema {
    /// The root's name and the definition text this schema was parsed from.
    pub(crate) fn definition(&self) -> (&str, &str) {
        (&self.definition.0, &self.definition.1)
    }

    /// Parses the definition text of `root` (`sensor_msgs/msg/JointState`).
    pub(crate) fn parse(root: &str, text: &str) -> Result<MessageSchema, String> {
        let definition = (root.to_owned(), Arc::from(text));
        // A service event (`pkg/srv/Name_Event`) is defined by its `.srv` text.
        let event = super::service_event::event_definition(root, text);
        let text = event.as_deref().unwrap_or(text);
        // Sections: the root's fields, then `MSG: name` sections.
        let mut sections: Vec<(String, Vec<&str>)> = vec![(canonical_name(root), Vec::new())];
        for line in text.lines() {
            let trimmed = line.trim();
            if trimmed.len() >= 3 && trimmed.chars().all(|c| c == '=') {
                sections.push((String::new(), Vec::new()));
                continue;
            }
            if let Some(name) = trimmed.strip_prefix("MSG:") {
                let last = sections.last_mut().ok_or("no section")?;
                last.0 = canonical_name(name);
                continue;
            }
            sections.last_mut().ok_or("no section")?.1.push(line);
        }
        sections.retain(|(name, lines)| !(name.is_empty() && lines.iter().all(|l| l.trim().is_empty())));
        if sections.len() > MAX_TYPES {
            return Err(format!("{} types in one definition (at most {MAX_TYPES})", sections.len()));
        }
        let index: HashMap<String, usize> =
            sections.iter().enumerate().map(|(i, (name, _))| (name.clone(), i)).collect();
        let mut types = Vec::with_capacity(sections.len());
        for (name, lines) in &sections {
            if name.is_empty() {
                return Err("a definition section without its `MSG: pkg/Type` line".into());
            }
            let package = name.split('/').next().unwrap_or_default();
            let mut fields = Vec::new();
            for (number, line) in lines.iter().enumerate() {
                let line = line.split('#').next().unwrap_or_default().trim();
                if line.is_empty() {
                    continue;
                }
                let at = || format!("`{name}` line {}: `{line}`", number + 1);
                let mut tokens = line.split_whitespace();
                let (Some(type_token), Some(field_name)) = (tokens.next(), tokens.next()) else {
                    return Err(format!("{}: not `TYPE NAME`", at()));
                };
                // A constant: `TYPE NAME=VALUE` or `TYPE NAME = VALUE`.
                if field_name.contains('=')
                    || line[line.find(field_name).unwrap_or(0) + field_name.len()..].trim_start().starts_with('=')
                {
                    continue;
                }
                let (base, arity) = parse_arity(type_token).map_err(|e| format!("{}: {e}", at()))?;
                let base = base.split("<=").next().unwrap_or(base); // string<=N
                let ty = match Primitive::parse(base) {
                    Some(primitive) => FieldType::Primitive(primitive),
                    None => {
                        let full = match base {
                            "Header" => "std_msgs/Header".to_owned(),
                            "time" => "builtin_interfaces/Time".to_owned(),
                            "duration" => "builtin_interfaces/Duration".to_owned(),
                            b if b.contains('/') => canonical_name(b),
                            b => format!("{package}/{b}"),
                        };
                        let Some(&i) = index.get(&full) else {
                            return Err(format!("{}: type `{full}` is not defined in the schema", at()));
                        };
                        FieldType::Message(i)
                    }
                };
                fields.push(Field { name: field_name.to_owned(), ty, arity });
            }
            if fields.is_empty() {
                let ty = FieldType::Primitive(Primitive::U8);
                fields.push(Field { name: EMPTY_TYPE_FIELD.to_owned(), ty, arity: Arity::One });
            }
            types.push(MessageType { name: name.clone(), fields });
        }
        let (min_sizes, fixed_numeric) = walk_types(&types)?;
        Ok(MessageSchema { types, min_sizes, fixed_numeric, definition })
    }

    /// Whether type `ty` holds only numbers of a fixed count (no sequence
    /// or string anywhere below it).
    pub(crate) fn is_fixed_numeric(&self, ty: usize) -> bool {
        self.fixed_numeric.get(ty).copied().unwrap_or(false)
    }

    /// The fewest bytes one value of `ty` takes on the wire (without padding).
    pub(crate) fn min_size(&self, ty: &FieldType) -> usize {
        match ty {
            FieldType::Primitive(p) => p.size(),
            FieldType::Message(inner) => self.min_sizes[*inner],
        }
    }

    /// The root type.
    pub(crate) fn root(&self) -> &MessageType {
        &self.types[0]
    }

    /// Whether the root has `header.stamp` (`std_msgs/Header`), or a
    /// `timestamp` (`builtin_interfaces/Time`) as Foxglove's types do.
    pub(crate) fn has_header(&self) -> bool {
        self.root().fields.iter().any(|f| {
            f.arity == Arity::One
                && matches!(f.ty, FieldType::Message(i) if (f.name == "header" && self.types[i].name == "std_msgs/Header")
                    || (f.name == "timestamp" && self.types[i].name == "builtin_interfaces/Time"))
        })
    }
}

/// Each type's fewest bytes on the wire and whether it is fixed numbers,
/// by one memoised walk from the root (every type visited once: linear in the definition), which also
/// refuses a type that contains itself (no finite wire form) and nesting
/// past [`MAX_NESTING`]. The walk's own depth is the nesting, so bounded.
fn walk_types(types: &[MessageType]) -> Result<(Vec<usize>, Vec<bool>), String> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        New,
        Open,
        Done,
    }
    fn visit(
        types: &[MessageType],
        at: usize,
        depth: usize,
        state: &mut [State],
        sizes: &mut [usize],
        numeric: &mut [bool],
    ) -> Result<(), String> {
        match state[at] {
            State::Done => return Ok(()),
            State::Open => return Err(format!("type `{}` contains itself", types[at].name)),
            State::New => {}
        }
        if depth > MAX_NESTING {
            return Err(format!("types nested more than {MAX_NESTING} deep (at `{}`)", types[at].name));
        }
        state[at] = State::Open;
        let mut size = 0usize;
        let mut fixed_numbers = true;
        for field in &types[at].fields {
            let one = match field.ty {
                FieldType::Primitive(p) => {
                    fixed_numbers &= !matches!(p, Primitive::String | Primitive::WString);
                    p.size()
                }
                FieldType::Message(inner) => {
                    visit(types, inner, depth + 1, state, sizes, numeric)?;
                    fixed_numbers &= numeric[inner];
                    sizes[inner]
                }
            };
            fixed_numbers &= !matches!(field.arity, Arity::Sequence(_));
            size = size.saturating_add(match field.arity {
                Arity::One => one,
                Arity::Fixed(n) => n.saturating_mul(one),
                Arity::Sequence(_) => 4,
            });
        }
        sizes[at] = size;
        numeric[at] = fixed_numbers;
        state[at] = State::Done;
        Ok(())
    }
    let mut state = vec![State::New; types.len()];
    let mut sizes = vec![0usize; types.len()];
    let mut numeric = vec![false; types.len()];
    if !types.is_empty() {
        visit(types, 0, 1, &mut state, &mut sizes, &mut numeric)?;
    }
    Ok((sizes, numeric))
}

fn parse_arity(token: &str) -> Result<(&str, Arity), String> {
    let Some(open) = token.find('[') else { return Ok((token, Arity::One)) };
    let base = &token[..open];
    let inside = token[open + 1..].strip_suffix(']').ok_or("an array type without its `]`")?;
    let arity = if inside.is_empty() {
        Arity::Sequence(None)
    } else if let Some(bound) = inside.strip_prefix("<=") {
        Arity::Sequence(Some(bound.trim().parse().map_err(|_| format!("bound `{bound}` is not a count"))?))
    } else {
        let n: usize = inside.trim().parse().map_err(|_| format!("array size `{inside}` is not a count"))?;
        if n > MAX_FIXED_ARRAY {
            return Err(format!("a fixed array of {n} elements (at most {MAX_FIXED_ARRAY})"));
        }
        Arity::Fixed(n)
    };
    Ok((base, arity))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joint_state_as_rosbags_writes_it() {
        let text = include_str!("../../robocache-datasets/tests/fixtures/ros2/joint_state.msg");
        let schema = MessageSchema::parse("sensor_msgs/msg/JointState", text).unwrap();
        assert_eq!(schema.root().name, "sensor_msgs/JointState");
        let names: Vec<&str> = schema.root().fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["header", "name", "position", "velocity", "effort"]);
        assert_eq!(schema.root().fields[2].ty, FieldType::Primitive(Primitive::F64));
        assert_eq!(schema.root().fields[2].arity, Arity::Sequence(None));
        assert!(schema.has_header());
    }

    #[test]
    fn constants_comments_bounds_and_relative_names() {
        let text = "uint8 OPEN=1 # a constant\nuint8 CLOSED = 0\nstring<=8 label  # bounded\nint32[3] fixed\nPoint[<=2] points\nbool flag true\n\
                    ================\nMSG: pkg/Point\nfloat64 x\nfloat64 y\n";
        let schema = MessageSchema::parse("pkg/msg/Thing", text).unwrap();
        let fields = &schema.root().fields;
        assert_eq!(fields.len(), 4);
        assert_eq!(fields[0].ty, FieldType::Primitive(Primitive::String));
        assert_eq!(fields[1].arity, Arity::Fixed(3));
        assert_eq!(fields[2].ty, FieldType::Message(1));
        assert_eq!(fields[2].arity, Arity::Sequence(Some(2)));
        assert!(!schema.has_header());
    }

    #[test]
    fn bad_definitions_are_errors_naming_the_line() {
        let missing = MessageSchema::parse("a/B", "c/D inner\n").unwrap_err();
        assert!(missing.contains("`c/D` is not defined"), "{missing}");
        let huge = MessageSchema::parse("a/B", "float64[999999999999] x\n").unwrap_err();
        assert!(huge.contains("fixed array"), "{huge}");
        let cyclic = MessageSchema::parse("a/B", "B again\n").unwrap_err();
        assert!(cyclic.contains("contains itself"), "{cyclic}");
        assert!(MessageSchema::parse("a/B", "float64\n").unwrap_err().contains("not `TYPE NAME`"));
    }

    /// `a/T0` holds two `T1`, each two `T2`, ...: 2^n paths through n types.
    fn fan_out(n: usize, last: &str) -> String {
        let mut text = String::new();
        for i in 0..n {
            if i > 0 {
                text.push_str(&format!("================\nMSG: a/T{i}\n"));
            }
            text.push_str(&format!("T{0} x\nT{0} y\n", i + 1));
        }
        text.push_str(&format!("================\nMSG: a/T{n}\n{last}\n"));
        text
    }

    #[test]
    fn a_definition_of_many_paths_is_walked_once() {
        // 60 types of two fields each: 2^60 paths, 60 visits.
        let started = std::time::Instant::now();
        let schema = MessageSchema::parse("a/T0", &fan_out(60, "float64 v")).unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "{:?}", started.elapsed());
        assert_eq!(schema.min_size(&FieldType::Message(0)), 1 << 63, "2^60 × 8 bytes");
        assert_eq!(schema.min_size(&FieldType::Message(59)), 16);
        assert!(schema.is_fixed_numeric(0));
        let with_text = MessageSchema::parse("a/T0", &fan_out(60, "string v")).unwrap();
        assert!(!with_text.is_fixed_numeric(0));
    }

    #[test]
    fn empty_types_take_one_byte_and_deep_nesting_is_refused() {
        let schema = MessageSchema::parse("a/B", "Empty[3] e\nfloat64 x\n================\nMSG: a/Empty\n").unwrap();
        let empty = &schema.types[1];
        assert_eq!(empty.fields.len(), 1);
        assert_eq!(empty.fields[0].name, EMPTY_TYPE_FIELD);
        assert_eq!(schema.min_size(&FieldType::Message(1)), 1);
        assert_eq!(schema.min_size(&FieldType::Message(0)), 3 + 8);
        // A chain of 100 types: refused by its depth, not by the stack.
        let mut chain = String::new();
        for i in 0..100 {
            if i > 0 {
                chain.push_str(&format!("================\nMSG: a/T{i}\n"));
            }
            chain.push_str(&format!("T{} next\n", i + 1));
        }
        chain.push_str("================\nMSG: a/T100\nuint8 v\n");
        let deep = MessageSchema::parse("a/T0", &chain).unwrap_err();
        assert!(deep.contains("nested more than 64 deep"), "{deep}");
        // A cycle through many types is still found.
        let cycle = MessageSchema::parse("a/T0", &fan_out(20, "T0 back")).unwrap_err();
        assert!(cycle.contains("contains itself"), "{cycle}");
    }
}
