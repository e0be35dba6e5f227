//! Grammar-built definitions, not byte edits (which cannot build them):
//! `ros2msg` texts of many types that use each other (fan-out, chains,
//! cycles, empty types, fixed arrays up to 2^25, bounded and unbounded
//! sequences, strings) and `ros2idl` texts of nested modules, structs,
//! typedefs and sequences. Whatever the grammar builds: parsed or refused,
//! and any bytes decoded or refused, within the deadline, never a panic or a
//! stack overflow (each case runs on a thread of the default 2 MiB stack).

use proptest::prelude::*;
use robocache_video::testing::within_deadline;

use super::cdr;
use super::idl_schema::to_msg_text;
use super::msg_schema::MessageSchema;

const PRIMITIVES: [&str; 8] = ["float64", "float32", "int32", "uint8", "bool", "string", "int64", "wstring"];
const COUNTS: [usize; 7] = [0, 1, 3, 64, 1 << 20, 1 << 24, 1 << 25];

/// One field: a primitive or another type (by index), and its arity.
#[derive(Clone, Debug)]
struct FieldDef {
    primitive: Option<usize>,
    target: usize,
    arity: u8,
    count: usize,
}

fn field() -> impl Strategy<Value = FieldDef> {
    (prop::option::of(0..PRIMITIVES.len()), 0usize..64, 0u8..4, 0..COUNTS.len())
        .prop_map(|(primitive, target, arity, count)| FieldDef { primitive, target, arity, count: COUNTS[count] })
}

/// `types` types of up to 4 fields; `backwards` lets a field name an
/// earlier type (or itself): cycles.
fn msg_text(types: &[Vec<FieldDef>], backwards: bool) -> String {
    let mut text = String::new();
    for (i, fields) in types.iter().enumerate() {
        if i > 0 {
            text.push_str(&format!("================\nMSG: fz/T{i}\n"));
        }
        for (k, f) in fields.iter().enumerate() {
            let base = match f.primitive {
                Some(p) => PRIMITIVES[p].to_owned(),
                None if types.len() == 1 => "float64".to_owned(),
                None => {
                    let span = types.len() - i - 1;
                    let target = match (backwards, span) {
                        (true, _) => f.target % types.len(),
                        (false, 0) => return text_with_primitive(text, k),
                        (false, span) => i + 1 + f.target % span,
                    };
                    format!("T{target}")
                }
            };
            let arity = match f.arity {
                0 => String::new(),
                1 => format!("[{}]", f.count),
                2 => "[]".to_owned(),
                _ => format!("[<={}]", f.count),
            };
            text.push_str(&format!("{base}{arity} f{k}\n"));
        }
    }
    text
}

fn text_with_primitive(mut text: String, k: usize) -> String {
    text.push_str(&format!("uint8 f{k}\n"));
    text
}

fn parse_and_decode(text: String, bytes: Vec<u8>) {
    within_deadline("a grammar-built definition", move || {
        if let Ok(schema) = MessageSchema::parse("fz/msg/T0", &text) {
            let _ = cdr::decode(&schema, &bytes);
        }
    });
}

/// IDL: modules nested `depth` deep, a struct with sequences nested `nest`
/// deep and a typedef of an array.
fn idl_text(depth: usize, nest: usize, count: usize, members: &[usize]) -> String {
    let mut text = String::new();
    for d in 0..depth {
        text.push_str(&format!("module m{d} {{ "));
    }
    text.push_str(&format!("typedef double arr[{count}]; struct T0 {{ "));
    for (k, &m) in members.iter().enumerate() {
        let ty = match m % 4 {
            0 => "double".to_owned(),
            1 => format!("{}double{}", "sequence<".repeat(nest), ">".repeat(nest)),
            2 => "arr".to_owned(),
            _ => format!("string<{count}>"),
        };
        text.push_str(&format!("{ty} f{k}; "));
    }
    text.push_str("}; ");
    text.push_str(&"}; ".repeat(depth));
    text
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_acyclic_definition_parses_and_any_bytes_decode_or_fail(
        types in prop::collection::vec(prop::collection::vec(field(), 0..4), 1..40),
        bytes in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let mut bytes = bytes;
        if bytes.len() >= 2 { bytes[0] = 0; bytes[1] = 1; }
        parse_and_decode(msg_text(&types, false), bytes);
    }

    #[test]
    fn any_definition_with_cycles_is_refused_or_parsed_in_time(
        types in prop::collection::vec(prop::collection::vec(field(), 0..4), 1..40),
    ) {
        parse_and_decode(msg_text(&types, true), vec![0, 1, 0, 0, 1, 2, 3, 4]);
    }

    #[test]
    fn any_idl_of_deep_modules_and_sequences_is_read_or_refused(
        depth in 0usize..200, nest in 0usize..200, count in 0usize..(1 << 26),
        members in prop::collection::vec(0usize..4, 0..6),
    ) {
        let text = idl_text(depth, nest, count, &members);
        within_deadline("a grammar-built IDL", move || {
            if let Ok(msg) = to_msg_text("m0/msg/T0", &text) {
                let _ = MessageSchema::parse("m0/msg/T0", &msg);
            }
        });
    }
}
