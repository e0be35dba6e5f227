//! A check of the Thrift (compact protocol) structures of a parquet file,
//! run on the bytes before the `parquet` crate decodes them: each page
//! header, and the footer's file metadata.
//!
//! Why: the `parquet` crate (60.1) skips a list, set or map of booleans
//! without reading a byte per element, so one header byte claiming
//! 2,147,483,647 of them spins for seconds, and nested ones for hours; and
//! it skips a binary past the end of a page header's stream without
//! noticing, one empty read per element. The fuzz harness
//! (`tests/fuzz.rs`) found such a page header in a damaged LeRobot data
//! file: no answer within its deadline.
//!
//! What is checked, so that whatever passes costs the crate work in
//! proportion to its bytes:
//! - every container (list, set, map) has elements that take at least one
//!   byte each on the wire, its claimed length fits in the bytes left, and
//!   booleans in a container are refused (legitimate page headers and file
//!   metadata hold none);
//! - every binary fits in the bytes given;
//! - nesting is at most [`MAX_DEPTH`] deep;
//! - every field the crate decodes by its declared type ([`schema`]) has a
//!   wire type of the same framing (an `i32` may come as any varint, a
//!   list as a set), and a declared list's elements too. The crate reads a
//!   known field by its declared type whatever the wire says, so a
//!   mismatch would make it read the bytes after it with another framing
//!   than this check's, where any byte could claim a list of booleans.
//!   Fields the schema does not name are walked by their own wire type, as
//!   the crate skips them.

mod schema;

use schema::{Declared, Field, FILE_META_DATA, PAGE_HEADER};

/// Deepest nesting of structures and containers accepted (legitimate page
/// headers nest 3 deep, file metadata 6).
pub(crate) const MAX_DEPTH: usize = 32;

/// Why a check did not pass.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Incomplete {
    /// The bytes given end inside the structure: more may complete it.
    NeedMore,
    /// The bytes cannot be a structure the crate would decode safely.
    Malformed(String),
}

/// The length of the page header at the start of `bytes`, checked.
pub(crate) fn page_header_len(bytes: &[u8]) -> Result<usize, Incomplete> {
    let mut cursor = Cursor { bytes, at: 0 };
    cursor.structure(Some(PAGE_HEADER), 0)?;
    Ok(cursor.at)
}

/// Checks the file metadata (the footer's Thrift, without its length and
/// magic) of `bytes`, which must hold all of it.
pub(crate) fn check_file_metadata(bytes: &[u8]) -> Result<(), String> {
    let mut cursor = Cursor { bytes, at: 0 };
    match cursor.structure(Some(FILE_META_DATA), 0) {
        Ok(()) => Ok(()),
        Err(Incomplete::NeedMore) => Err(format!("the file metadata ends inside a field ({} bytes)", bytes.len())),
        Err(Incomplete::Malformed(problem)) => Err(problem),
    }
}

/// How a value's bytes are laid out: wire types of one framing are read
/// alike (every integer is a zigzag varint, a set is a list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    Bool,
    Byte,
    Varint,
    Double,
    Binary,
    List,
    Map,
    Struct,
    Uuid,
}

/// The framing of a compact-protocol wire type (a field header's low
/// nibble, or a container's element type), `None` for an unknown one.
fn framing(wire_type: u8) -> Option<Framing> {
    Some(match wire_type {
        1 | 2 => Framing::Bool,
        3 => Framing::Byte,
        4..=6 => Framing::Varint,
        7 => Framing::Double,
        8 => Framing::Binary,
        9 | 10 => Framing::List,
        11 => Framing::Map,
        12 => Framing::Struct,
        13 => Framing::Uuid,
        _ => return None,
    })
}

impl Declared {
    fn framing(self) -> Framing {
        match self {
            Declared::Bool => Framing::Bool,
            Declared::Byte => Framing::Byte,
            Declared::Varint => Framing::Varint,
            Declared::Double => Framing::Double,
            Declared::Binary => Framing::Binary,
            Declared::List(_) => Framing::List,
            Declared::Struct(_) => Framing::Struct,
        }
    }
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

fn malformed(problem: String) -> Incomplete {
    Incomplete::Malformed(problem)
}

impl Cursor<'_> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn byte(&mut self) -> Result<u8, Incomplete> {
        let byte = *self.bytes.get(self.at).ok_or(Incomplete::NeedMore)?;
        self.at += 1;
        Ok(byte)
    }

    fn skip(&mut self, n: u64) -> Result<(), Incomplete> {
        if n > self.left() as u64 {
            return Err(Incomplete::NeedMore);
        }
        self.at += n as usize;
        Ok(())
    }

    /// An unsigned LEB128 varint, as the crate reads it (at most 10 bytes here).
    fn varint(&mut self) -> Result<u64, Incomplete> {
        let start = self.at;
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f).wrapping_shl(shift);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(malformed(format!("a varint of more than 10 bytes at byte {start}")))
    }

    fn zigzag(&mut self) -> Result<i64, Incomplete> {
        let value = self.varint()?;
        Ok((value >> 1) as i64 ^ -((value & 1) as i64))
    }

    /// A container's length: at most `i32::MAX` (the crate's limit), and
    /// no more than the bytes left, since every element takes one.
    fn container_len(&mut self, len: u64, what: &str) -> Result<u64, Incomplete> {
        let start = self.at;
        if len > i32::MAX as u64 {
            return Err(malformed(format!("a {what} of {len} elements at byte {start}")));
        }
        if len > self.left() as u64 {
            return Err(Incomplete::NeedMore);
        }
        Ok(len)
    }

    /// An element type of a container; booleans are refused (the crate
    /// skips them without reading their bytes).
    fn element_type(&self, nibble: u8, what: &str) -> Result<u8, Incomplete> {
        match framing(nibble) {
            Some(Framing::Bool) => {
                Err(malformed(format!("a {what} of booleans before byte {} (none is expected here)", self.at)))
            }
            Some(_) => Ok(nibble),
            None => Err(malformed(format!("a {what} of unknown element type {nibble} before byte {}", self.at))),
        }
    }

    /// One structure: fields up to a stop. `schema` declares known fields;
    /// `None` walks every field by its own wire type.
    fn structure(&mut self, schema: Option<&[Field]>, depth: usize) -> Result<(), Incomplete> {
        if depth > MAX_DEPTH {
            return Err(malformed(format!("structures nested more than {MAX_DEPTH} deep at byte {}", self.at)));
        }
        let mut last_id = 0i16;
        loop {
            let start = self.at;
            let header = self.byte()?;
            let wire_type = header & 0x0f;
            if wire_type == 0 {
                return Ok(());
            }
            let Some(wire_framing) = framing(wire_type) else {
                return Err(malformed(format!("a field of unknown wire type {wire_type} at byte {start}")));
            };
            let delta = header >> 4;
            let id = if delta != 0 {
                last_id
                    .checked_add(i16::from(delta))
                    .ok_or_else(|| malformed(format!("a field id past {} after {last_id} at byte {start}", i16::MAX)))?
            } else {
                // As the crate reads a full field id: a zigzag varint cast to i16.
                self.zigzag()? as i16
            };
            match schema.and_then(|fields| fields.iter().find(|f| f.id == id)) {
                Some(field) if field.declared.framing() != wire_framing => {
                    return Err(malformed(format!(
                        "field {id} at byte {start} has wire type {wire_type}, not one of its declared {:?}",
                        field.declared.framing()
                    )));
                }
                Some(field) => self.declared(field.declared, wire_type, depth)?,
                None => self.value(wire_type, depth)?,
            }
            last_id = id;
        }
    }

    /// A value of a declared type whose framing `wire_type` matches.
    fn declared(&mut self, declared: Declared, wire_type: u8, depth: usize) -> Result<(), Incomplete> {
        match declared {
            Declared::Struct(fields) => self.structure(Some(fields), depth + 1),
            Declared::List(element) => self.list(Some(*element), depth),
            _ => self.value(wire_type, depth),
        }
    }

    /// One value of `wire_type` (a field's or a container element's).
    fn value(&mut self, wire_type: u8, depth: usize) -> Result<(), Incomplete> {
        match framing(wire_type) {
            // A field's boolean is its header's type; no byte follows.
            Some(Framing::Bool) => Ok(()),
            Some(Framing::Byte) => self.skip(1),
            Some(Framing::Varint) => self.varint().map(|_| ()),
            Some(Framing::Double) => self.skip(8),
            Some(Framing::Binary) => {
                let len = self.varint()?;
                self.skip(len)
            }
            Some(Framing::List) => self.list(None, depth),
            Some(Framing::Map) => self.map(depth),
            Some(Framing::Struct) => self.structure(None, depth + 1),
            Some(Framing::Uuid) => self.skip(16),
            None => Err(malformed(format!("a value of unknown wire type {wire_type} before byte {}", self.at))),
        }
    }

    /// A list or set; `element` is its declared element type, if known.
    fn list(&mut self, element: Option<Declared>, depth: usize) -> Result<(), Incomplete> {
        if depth >= MAX_DEPTH {
            return Err(malformed(format!("containers nested more than {MAX_DEPTH} deep at byte {}", self.at)));
        }
        let start = self.at;
        let header = self.byte()?;
        if header == 0 {
            // How some writers write an empty list.
            return Ok(());
        }
        let element_type = self.element_type(header & 0x0f, "list")?;
        if let Some(declared) = element {
            if framing(element_type) != Some(declared.framing()) {
                return Err(malformed(format!(
                    "the list at byte {start} has elements of wire type {element_type}, not of its declared {:?}",
                    declared.framing()
                )));
            }
        }
        let claimed = match header >> 4 {
            15 => self.varint()?,
            short => u64::from(short),
        };
        for _ in 0..self.container_len(claimed, "list")? {
            match element {
                Some(declared) => self.declared(declared, element_type, depth + 1)?,
                None => self.value(element_type, depth + 1)?,
            }
        }
        Ok(())
    }

    fn map(&mut self, depth: usize) -> Result<(), Incomplete> {
        if depth >= MAX_DEPTH {
            return Err(malformed(format!("containers nested more than {MAX_DEPTH} deep at byte {}", self.at)));
        }
        let claimed = self.varint()?;
        let len = self.container_len(claimed, "map")?;
        if len == 0 {
            return Ok(());
        }
        let types = self.byte()?;
        let key = self.element_type(types >> 4, "map")?;
        let value = self.element_type(types & 0x0f, "map")?;
        for _ in 0..len {
            self.value(key, depth + 1)?;
            self.value(value, depth + 1)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any bytes: an answer, never a panic; a header that passes is
        /// self-delimiting (the same length alone, or with bytes after it).
        #[test]
        fn any_bytes_are_measured_or_refused(bytes in prop::collection::vec(any::<u8>(), 0..512), tail in any::<u8>()) {
            let _ = check_file_metadata(&bytes);
            if let Ok(len) = page_header_len(&bytes) {
                prop_assert!(len <= bytes.len());
                prop_assert_eq!(page_header_len(&bytes[..len]), Ok(len));
                let mut longer = bytes[..len].to_vec();
                longer.push(tail);
                prop_assert_eq!(page_header_len(&longer), Ok(len));
            }
        }
    }

    /// A data page header: type 0, sizes 100 and 80, a data page header
    /// of 10 values, plain encodings, with statistics `min = max = [7]`.
    fn data_page_header() -> Vec<u8> {
        vec![
            0x15, 0x00, // 1: i32 type = 0
            0x15, 0xc8, 0x01, // 2: i32 uncompressed_page_size = 100
            0x15, 0xa0, 0x01, // 3: i32 compressed_page_size = 80
            0x2c, // 5: struct data_page_header
            0x15, 0x14, // 1: i32 num_values = 10
            0x15, 0x00, 0x15, 0x00, 0x15, 0x00, // 2, 3, 4: encodings
            0x1c, // 5: struct statistics
            0x18, 0x01, 0x07, // 1: binary max = [7]
            0x18, 0x01, 0x07, // 2: binary min = [7]
            0x51, // 7 (delta 5): bool is_max_value_exact = true
            0x00, // end of statistics
            0x00, // end of data_page_header
            0x00, // end of the page header
        ]
    }

    #[test]
    fn a_page_header_is_measured_to_its_stop() {
        let mut bytes = data_page_header();
        let len = bytes.len();
        bytes.extend_from_slice(&[0xde, 0xad]);
        assert_eq!(page_header_len(&bytes), Ok(len));
    }

    #[test]
    fn a_cut_page_header_asks_for_more_at_every_cut() {
        let bytes = data_page_header();
        for cut in 0..bytes.len() {
            assert_eq!(page_header_len(&bytes[..cut]), Err(Incomplete::NeedMore), "cut at {cut}");
        }
    }

    /// The header the fuzz harness found, in kind: an unknown field (9)
    /// holding a list that claims i32::MAX booleans (the crate skips these
    /// without reading, for seconds), and a list of such lists (for hours).
    #[test]
    fn boolean_containers_are_refused_before_their_elements() {
        let mut bools = vec![0x15, 0x00, 0x89, 0xf1, 0xff, 0xff, 0xff, 0xff, 0x07];
        bools.extend_from_slice(&[0u8; 64]);
        let Err(Incomplete::Malformed(problem)) = page_header_len(&bools) else { panic!("accepted") };
        assert!(problem.contains("list of booleans"), "{problem}");
        // File metadata field 15 (unknown): a list of one list of booleans.
        let lists = [0xf9, 0x19, 0xf1, 0xff, 0xff, 0xff, 0xff, 0x07];
        let problem = check_file_metadata(&lists).unwrap_err();
        assert!(problem.contains("list of booleans"), "{problem}");
        let map = [0xfb, 0x01, 0x15];
        let problem = check_file_metadata(&map).unwrap_err();
        assert!(problem.contains("map of booleans"), "{problem}");
    }

    #[test]
    fn container_lengths_past_the_bytes_or_i32_are_not_accepted() {
        // Field 9 of a page header, 10 of file metadata (unknown to both):
        // a list of 1,000 i32 in 1 byte: more bytes might hold it.
        assert_eq!(page_header_len(&[0x99, 0xf5, 0xe8, 0x07, 0x00]), Err(Incomplete::NeedMore));
        let problem = check_file_metadata(&[0xa9, 0xf5, 0xe8, 0x07, 0x00]).unwrap_err();
        assert!(problem.contains("ends inside"), "{problem}");
        // 2^31 elements: more than the crate reads.
        let huge = [0x99, 0xf5, 0x80, 0x80, 0x80, 0x80, 0x08];
        let Err(Incomplete::Malformed(problem)) = page_header_len(&huge) else { panic!("accepted") };
        assert!(problem.contains("2147483648 elements"), "{problem}");
        // A binary of 2^60 bytes.
        let binary = [0x98, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10, 0x00];
        assert_eq!(page_header_len(&binary), Err(Incomplete::NeedMore));
    }

    #[test]
    fn a_known_field_of_another_framing_is_refused() {
        // compressed_page_size (3) written as a binary.
        let bytes = [0x15, 0x00, 0x15, 0x02, 0x18, 0x01, 0x05, 0x00];
        let Err(Incomplete::Malformed(problem)) = page_header_len(&bytes) else { panic!("accepted") };
        assert!(problem.contains("field 3 at byte 4 has wire type 8"), "{problem}");
        // num_rows (3) of file metadata, the same.
        let problem = check_file_metadata(&[0x15, 0x00, 0x28, 0x01, 0x05, 0x00]).unwrap_err();
        assert!(problem.contains("field 3 at byte 2 has wire type 8"), "{problem}");
        // The schema (2) as a list of i32, not of structures.
        let problem = check_file_metadata(&[0x15, 0x02, 0x19, 0x15, 0x02, 0x00]).unwrap_err();
        assert!(problem.contains("list at byte 3 has elements of wire type 5"), "{problem}");
    }

    #[test]
    fn integers_of_any_width_and_sets_for_lists_pass() {
        // uncompressed_page_size as an i64, compressed_page_size as an i16.
        let header = [0x15, 0x00, 0x16, 0x02, 0x14, 0x02, 0x00];
        assert_eq!(page_header_len(&header), Ok(header.len()));
        // File metadata: version, then an empty schema written as a set.
        assert_eq!(check_file_metadata(&[0x15, 0x02, 0x1a, 0x0c, 0x00]), Ok(()));
    }

    #[test]
    fn deep_nesting_and_long_varints_are_refused() {
        // File metadata field 10 (unknown): structures in structures.
        let mut deep = vec![0xac];
        deep.extend(vec![0x1c; MAX_DEPTH + 2]);
        deep.extend(vec![0x00; MAX_DEPTH + 4]);
        let problem = check_file_metadata(&deep).unwrap_err();
        assert!(problem.contains("nested"), "{problem}");
        let varint = [0x15, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00];
        let Err(Incomplete::Malformed(problem)) = page_header_len(&varint) else { panic!("accepted") };
        assert!(problem.contains("varint"), "{problem}");
    }
}
