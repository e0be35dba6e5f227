//! CDR (XCDR1, as ROS 2's rmw writes it) decoded by reflection over a
//! [`MessageSchema`]: any message type, little- or big-endian.
//!
//! A message is a 4-byte encapsulation header (`00 01`: little-endian,
//! `00 00`: big-endian, then two option bytes), then its fields in order.
//! Each primitive is aligned to its own size (8 for 64-bit values),
//! counted from the end of the header; a string is a `uint32` length
//! (with its NUL) and its bytes; a sequence is a `uint32` count and its
//! elements; a fixed array is its elements.
//!
//! Bounds: every count is checked against the bytes left before anything
//! is allocated for it (each element takes at least its type's fewest
//! bytes: an empty type's one), and a message builds at most
//! [`MAX_VALUES_BASE`] + [`MAX_VALUES_PER_BYTE`] values per byte (types of
//! zero bytes, `T[0]` fields, in fixed arrays would otherwise build 2^48
//! values from 4 bytes), so a message of N bytes costs O(N) memory and time
//! whatever its counts and its definition say. The reader's recursion is
//! the definition's nesting, at most [`super::msg_schema::MAX_NESTING`].

use std::borrow::Cow;

use super::msg_schema::{Arity, FieldType, MessageSchema, Primitive};

/// A decoded value. Strings (valid UTF-8) and byte sequences borrow the
/// message's bytes: decoding a camera message copies none of its pixels,
/// and a JointState none of its names ([`Value::into_owned`] keeps one).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value<'a> {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(Cow<'a, str>),
    /// A `uint8`/`byte`/`char` array or sequence (image data), kept as bytes.
    Bytes(Cow<'a, [u8]>),
    List(Vec<Value<'a>>),
    /// A message: its type (an index in the schema) and its fields in order.
    Struct(usize, Vec<Value<'a>>),
}

impl<'a> Value<'a> {
    /// The value with nothing borrowed, to keep past the message's bytes.
    pub(crate) fn into_owned(self) -> Value<'static> {
        match self {
            Value::Bool(b) => Value::Bool(b),
            Value::Int(i) => Value::Int(i),
            Value::UInt(u) => Value::UInt(u),
            Value::Float(f) => Value::Float(f),
            Value::Str(s) => Value::Str(Cow::Owned(s.into_owned())),
            Value::Bytes(b) => Value::Bytes(Cow::Owned(b.into_owned())),
            Value::List(items) => Value::List(items.into_iter().map(Value::into_owned).collect()),
            Value::Struct(ty, fields) => Value::Struct(ty, fields.into_iter().map(Value::into_owned).collect()),
        }
    }

    /// The value at a dotted field path (`pose.position.x`; empty: this value).
    pub(crate) fn get<'v>(&'v self, schema: &MessageSchema, path: &str) -> Option<&'v Value<'a>> {
        let mut at = self;
        for part in path.split('.').filter(|p| !p.is_empty()) {
            at = match at {
                Value::Struct(ty, fields) => {
                    let index = schema.types[*ty].fields.iter().position(|f| f.name == part)?;
                    &fields[index]
                }
                Value::List(items) => items.get(part.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(at)
    }

    /// Appends every number under this value (bools as 0 or 1, bytes as
    /// their values) in field order; strings are skipped.
    pub(crate) fn numbers(&self, out: &mut Vec<f64>) {
        match self {
            Value::Bool(b) => out.push(f64::from(u8::from(*b))),
            Value::Int(i) => out.push(*i as f64),
            Value::UInt(u) => out.push(*u as f64),
            Value::Float(f) => out.push(*f),
            Value::Str(_) => {}
            Value::Bytes(bytes) => out.extend(bytes.iter().map(|&b| f64::from(b))),
            Value::List(items) | Value::Struct(_, items) => items.iter().for_each(|v| v.numbers(out)),
        }
    }

    /// `header.stamp` (a `builtin_interfaces/Time` under a message's
    /// `std_msgs/Header`, or a root `timestamp`) in nanoseconds, where the
    /// value has one.
    pub(crate) fn header_stamp_ns(&self, schema: &MessageSchema) -> Option<i128> {
        // Foxglove's types (CompressedVideo) carry `timestamp` instead.
        let stamp = self.get(schema, "header.stamp").or_else(|| self.get(schema, "timestamp"))?;
        let sec = stamp.get(schema, "sec").and_then(Value::as_i64)?;
        let nanosec = stamp.get(schema, "nanosec").and_then(Value::as_u64)?;
        Some(i128::from(sec) * 1_000_000_000 + i128::from(nanosec))
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s.as_ref()),
            _ => None,
        }
    }

    /// A list of strings (`JointState.name`).
    pub(crate) fn strings(&self) -> Option<Vec<&str>> {
        match self {
            Value::List(items) => items.iter().map(Value::as_str).collect(),
            _ => None,
        }
    }

    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self {
            Value::UInt(u) => Some(*u),
            Value::Int(i) => u64::try_from(*i).ok(),
            _ => None,
        }
    }

    pub(crate) fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::UInt(u) => i64::try_from(*u).ok(),
            _ => None,
        }
    }
}

/// The values any message may build, plus [`MAX_VALUES_PER_BYTE`] per byte.
pub(crate) const MAX_VALUES_BASE: usize = 1 << 16;
/// The values a message may build per byte beyond [`MAX_VALUES_BASE`]
/// (real messages build under 1: a `bool[]` builds 1, a struct of one
/// `uint8` 2).
pub(crate) const MAX_VALUES_PER_BYTE: usize = 16;

struct Reader<'a, 's> {
    bytes: &'a [u8],
    at: usize,
    little: bool,
    /// Values this message may still build.
    values_left: usize,
    /// The field being read, for errors (names borrowed from the schema:
    /// nothing is allocated per field).
    path: Vec<&'s str>,
}

/// Decodes one CDR message of `schema`'s root type.
pub(crate) fn decode<'a>(schema: &MessageSchema, bytes: &'a [u8]) -> Result<Value<'a>, String> {
    let Some(header) = bytes.get(..4) else {
        return Err(format!("{} bytes: shorter than the 4-byte CDR header", bytes.len()));
    };
    let little = match header[1] {
        0 | 2 => false,
        1 | 3 => true,
        other => return Err(format!("encapsulation kind {other:#04x} is not CDR (0x00 or 0x01)")),
    };
    let values_left = MAX_VALUES_BASE.saturating_add(bytes.len().saturating_mul(MAX_VALUES_PER_BYTE));
    let mut reader = Reader { bytes: &bytes[4..], at: 0, little, values_left, path: Vec::new() };
    reader.message(schema, 0)
}

impl<'a, 's> Reader<'a, 's> {
    fn fail(&self, what: &str) -> String {
        format!("field `{}` at byte {}: {what}", self.path.join("."), self.at + 4)
    }

    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn align(&mut self, size: usize) -> Result<(), String> {
        let pad = (size - self.at % size) % size;
        if pad > self.left() {
            return Err(self.fail("the message ends inside its padding"));
        }
        self.at += pad;
        Ok(())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.left() {
            return Err(self.fail(&format!("needs {n} bytes, {} are left", self.left())));
        }
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], String> {
        self.align(N)?;
        let mut raw: [u8; N] = self.take(N)?.try_into().map_err(|_| self.fail("short read"))?;
        if self.little != cfg!(target_endian = "little") {
            raw.reverse();
        }
        Ok(raw)
    }

    fn count(&mut self, min_element: usize) -> Result<usize, String> {
        let count = u32::from_ne_bytes(self.fixed::<4>()?) as usize;
        // Every element takes at least `min_element` bytes (elements of no
        // bytes are still bounded by the bytes left).
        if count.saturating_mul(min_element.max(1)) > self.left() && !(min_element == 0 && count <= self.left()) {
            return Err(self.fail(&format!("a count of {count} does not fit the {} bytes left", self.left())));
        }
        Ok(count)
    }

    fn primitive(&mut self, primitive: Primitive) -> Result<Value<'a>, String> {
        Ok(match primitive {
            Primitive::Bool => Value::Bool(self.take(1)?[0] != 0),
            Primitive::U8 => Value::UInt(self.take(1)?[0].into()),
            Primitive::I8 => Value::Int(i8::from_ne_bytes(self.fixed::<1>()?).into()),
            Primitive::I16 => Value::Int(i16::from_ne_bytes(self.fixed()?).into()),
            Primitive::U16 => Value::UInt(u16::from_ne_bytes(self.fixed()?).into()),
            Primitive::I32 => Value::Int(i32::from_ne_bytes(self.fixed()?).into()),
            Primitive::U32 => Value::UInt(u32::from_ne_bytes(self.fixed()?).into()),
            Primitive::I64 => Value::Int(i64::from_ne_bytes(self.fixed()?)),
            Primitive::U64 => Value::UInt(u64::from_ne_bytes(self.fixed()?)),
            Primitive::F32 => Value::Float(f32::from_ne_bytes(self.fixed()?).into()),
            Primitive::F64 => Value::Float(f64::from_ne_bytes(self.fixed()?)),
            Primitive::String => {
                let len = self.count(1)?;
                let raw = self.take(len)?;
                let text = raw.strip_suffix(&[0]).unwrap_or(raw);
                Value::Str(String::from_utf8_lossy(text))
            }
            Primitive::WString => {
                let units = self.count(2)?;
                let mut text = Vec::with_capacity(units);
                for _ in 0..units {
                    text.push(u16::from_ne_bytes(self.fixed()?));
                }
                Value::Str(Cow::Owned(String::from_utf16_lossy(&text).trim_end_matches('\0').to_owned()))
            }
        })
    }

    /// Counts one value built against the message's budget.
    fn spend(&mut self) -> Result<(), String> {
        match self.values_left.checked_sub(1) {
            Some(left) => {
                self.values_left = left;
                Ok(())
            }
            None => Err(self.fail(&format!(
                "the message builds more than {MAX_VALUES_BASE} + {MAX_VALUES_PER_BYTE} values per byte of its {} \
                 (its definition nests types of no bytes in fixed arrays)",
                self.bytes.len() + 4
            ))),
        }
    }

    fn element(&mut self, schema: &'s MessageSchema, ty: &FieldType) -> Result<Value<'a>, String> {
        self.spend()?;
        match ty {
            FieldType::Primitive(p) => self.primitive(*p),
            FieldType::Message(inner) => self.message(schema, *inner),
        }
    }

    fn message(&mut self, schema: &'s MessageSchema, ty: usize) -> Result<Value<'a>, String> {
        let kind = &schema.types[ty];
        let mut values = Vec::with_capacity(kind.fields.len());
        for field in &kind.fields {
            self.path.push(&field.name);
            let count = match field.arity {
                Arity::One => None,
                Arity::Fixed(n) => Some(n),
                Arity::Sequence(bound) => {
                    let count = self.count(schema.min_size(&field.ty))?;
                    if bound.is_some_and(|b| count > b) {
                        return Err(
                            self.fail(&format!("{count} elements in a sequence bounded to {}", bound.unwrap_or(0)))
                        );
                    }
                    Some(count)
                }
            };
            let value = match (count, &field.ty) {
                (None, ty) => self.element(schema, ty)?,
                (Some(n), FieldType::Primitive(Primitive::U8)) => Value::Bytes(Cow::Borrowed(self.take(n)?)),
                (Some(n), ty) => {
                    if n.saturating_mul(schema.min_size(ty)) > self.left() {
                        return Err(self.fail(&format!("{n} elements do not fit the {} bytes left", self.left())));
                    }
                    let mut items = Vec::with_capacity(n.min(self.left()));
                    for _ in 0..n {
                        items.push(self.element(schema, ty)?);
                    }
                    Value::List(items)
                }
            };
            values.push(value);
            self.path.pop();
        }
        Ok(Value::Struct(ty, values))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joint_state() -> MessageSchema {
        MessageSchema::parse(
            "sensor_msgs/msg/JointState",
            include_str!("../../robocache-datasets/tests/fixtures/ros2/joint_state.msg"),
        )
        .unwrap()
    }

    #[test]
    fn a_big_endian_joint_state_as_rosbags_wrote_it() {
        let schema = joint_state();
        let bytes = include_bytes!("../../robocache-datasets/tests/fixtures/ros2/joint_state_be.cdr");
        let message = decode(&schema, bytes).unwrap();
        assert_eq!(message.get(&schema, "name").unwrap().strings().unwrap(), ["a", "bb"]);
        let mut position = Vec::new();
        message.get(&schema, "position").unwrap().numbers(&mut position);
        assert_eq!(position, [1.5, -2.25]);
        let mut velocity = Vec::new();
        message.get(&schema, "velocity").unwrap().numbers(&mut velocity);
        assert_eq!(velocity, [0.125]);
        let stamp = message.get(&schema, "header.stamp").unwrap();
        assert_eq!(stamp.get(&schema, "sec").unwrap().as_i64(), Some(1_700_000_000));
        assert_eq!(stamp.get(&schema, "nanosec").unwrap().as_u64(), Some(123));
    }

    #[test]
    fn cut_and_lying_messages_are_errors_naming_the_field() {
        let schema = joint_state();
        let bytes = include_bytes!("../../robocache-datasets/tests/fixtures/ros2/joint_state_be.cdr");
        for cut in 0..bytes.len() {
            assert!(decode(&schema, &bytes[..cut]).is_err(), "cut at {cut} decoded");
        }
        // The `name` count made 2^31: an error before any allocation.
        let mut lying = bytes.to_vec();
        let name_count_at = 4 + 4 + 4 + 4 + 8; // stamp, frame_id length and text ("base\0" padded)
        lying[name_count_at..name_count_at + 4].copy_from_slice(&0x8000_0000u32.to_be_bytes());
        let error = decode(&schema, &lying).unwrap_err();
        assert!(error.contains("field `name`") && error.contains("does not fit"), "{error}");
        assert!(decode(&schema, &[0, 9, 0, 0]).unwrap_err().contains("not CDR"));
    }

    #[test]
    fn an_empty_type_is_one_byte_and_the_field_after_it_reads_right() {
        // `test_msgs/Arrays`-like: three `std_msgs/Empty`, then a float64
        // aligned to 8 after them (bytes 4..7 are padding).
        let schema =
            MessageSchema::parse("a/B", "std_msgs/Empty[3] e\nfloat64 x\n=====\nMSG: std_msgs/Empty\n").unwrap();
        let mut bytes = vec![0, 1, 0, 0, 0, 0, 0, 0xAA, 0, 0, 0, 0];
        bytes.extend_from_slice(&2.5f64.to_le_bytes());
        let message = decode(&schema, &bytes).unwrap();
        let mut x = Vec::new();
        message.get(&schema, "x").unwrap().numbers(&mut x);
        assert_eq!(x, [2.5]);
        let Some(Value::List(empties)) = message.get(&schema, "e") else { panic!("{message:?}") };
        assert_eq!(empties.len(), 3);
        // One byte short of the float: an error, not a zero.
        assert!(decode(&schema, &bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn types_of_no_bytes_in_fixed_arrays_are_refused_by_the_value_budget() {
        // 2^24 × 2^24 values of a type of no bytes, from a 4-byte message.
        let text = "Z[16777216] a\n=====\nMSG: a/Z\nY[16777216] b\n=====\nMSG: a/Y\nfloat64[0] x\n";
        let schema = MessageSchema::parse("a/B", text).unwrap();
        let started = std::time::Instant::now();
        let error = decode(&schema, &[0, 1, 0, 0]).unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "{:?}", started.elapsed());
        assert!(error.contains("values per byte"), "{error}");
    }
}
