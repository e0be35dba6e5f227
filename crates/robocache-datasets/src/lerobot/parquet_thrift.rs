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
//! - a page header's known fields have the wire type the parquet format
//!   declares. The crate decodes a known field by its declared type,
//!   whatever the wire says, so a mismatch would make it read the bytes
//!   after it with another framing than this check's.
//!
//! The file metadata is checked without its schema (only the rules above
//! that need none): a known field of the wrong wire type there could still
//! make the crate read what follows with another framing. The metadata is
//! one bounded slice the crate reads with bounds checks; what is left is a
//! boolean container conjured by such a misread.

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
    match cursor.structure(None, 0) {
        Ok(()) => Ok(()),
        Err(Incomplete::NeedMore) => Err(format!("the file metadata ends inside a field ({} bytes)", bytes.len())),
        Err(Incomplete::Malformed(problem)) => Err(problem),
    }
}

/// Wire types of the compact protocol (a field header's low nibble).
mod wire {
    pub const BOOL_TRUE: u8 = 1;
    pub const BOOL_FALSE: u8 = 2;
    pub const BYTE: u8 = 3;
    pub const I16: u8 = 4;
    pub const I32: u8 = 5;
    pub const I64: u8 = 6;
    pub const DOUBLE: u8 = 7;
    pub const BINARY: u8 = 8;
    pub const LIST: u8 = 9;
    pub const SET: u8 = 10;
    pub const MAP: u8 = 11;
    pub const STRUCT: u8 = 12;
    pub const UUID: u8 = 13;
}

/// What a known field holds.
#[derive(Clone, Copy)]
enum Declared {
    Bool,
    I32,
    I64,
    Binary,
    Struct(&'static [Field]),
}

#[derive(Clone, Copy)]
struct Field {
    id: i16,
    declared: Declared,
}

const fn field(id: i16, declared: Declared) -> Field {
    Field { id, declared }
}

// The page header as parquet-format declares it (`parquet.thrift`), every
// field the crate decodes by its type.
const PAGE_STATISTICS: &[Field] = &[
    field(1, Declared::Binary),
    field(2, Declared::Binary),
    field(3, Declared::I64),
    field(4, Declared::I64),
    field(5, Declared::Binary),
    field(6, Declared::Binary),
    field(7, Declared::Bool),
    field(8, Declared::Bool),
    field(9, Declared::I64),
];
const DATA_PAGE_HEADER: &[Field] = &[
    field(1, Declared::I32),
    field(2, Declared::I32),
    field(3, Declared::I32),
    field(4, Declared::I32),
    field(5, Declared::Struct(PAGE_STATISTICS)),
];
const INDEX_PAGE_HEADER: &[Field] = &[];
const DICTIONARY_PAGE_HEADER: &[Field] = &[field(1, Declared::I32), field(2, Declared::I32), field(3, Declared::Bool)];
const DATA_PAGE_HEADER_V2: &[Field] = &[
    field(1, Declared::I32),
    field(2, Declared::I32),
    field(3, Declared::I32),
    field(4, Declared::I32),
    field(5, Declared::I32),
    field(6, Declared::I32),
    field(7, Declared::Bool),
    field(8, Declared::Struct(PAGE_STATISTICS)),
];
const PAGE_HEADER: &[Field] = &[
    field(1, Declared::I32),
    field(2, Declared::I32),
    field(3, Declared::I32),
    field(4, Declared::I32),
    field(5, Declared::Struct(DATA_PAGE_HEADER)),
    field(6, Declared::Struct(INDEX_PAGE_HEADER)),
    field(7, Declared::Struct(DICTIONARY_PAGE_HEADER)),
    field(8, Declared::Struct(DATA_PAGE_HEADER_V2)),
];

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
        match nibble {
            wire::BOOL_TRUE | wire::BOOL_FALSE => {
                Err(malformed(format!("a {what} of booleans before byte {} (none is expected here)", self.at)))
            }
            wire::BYTE..=wire::UUID => Ok(nibble),
            _ => Err(malformed(format!("a {what} of unknown element type {nibble} before byte {}", self.at))),
        }
    }

    /// One structure: fields up to a stop. `schema` names the wire types
    /// of known fields; `None` checks any field by its own wire type.
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
            if wire_type > wire::UUID {
                return Err(malformed(format!("a field of unknown wire type {wire_type} at byte {start}")));
            }
            let delta = header >> 4;
            let id = if delta != 0 {
                last_id
                    .checked_add(i16::from(delta))
                    .ok_or_else(|| malformed(format!("a field id past {} after {last_id} at byte {start}", i16::MAX)))?
            } else {
                // As the crate reads a full field id: a zigzag varint cast to i16.
                self.zigzag()? as i16
            };
            let known = schema.and_then(|fields| fields.iter().find(|f| f.id == id));
            match known {
                Some(field) => self.declared(field.declared, wire_type, id, start, depth)?,
                None => self.value(wire_type, depth)?,
            }
            last_id = id;
        }
    }

    fn declared(
        &mut self,
        declared: Declared,
        wire_type: u8,
        id: i16,
        start: usize,
        depth: usize,
    ) -> Result<(), Incomplete> {
        let expected = match declared {
            Declared::Bool => matches!(wire_type, wire::BOOL_TRUE | wire::BOOL_FALSE),
            Declared::I32 => wire_type == wire::I32,
            Declared::I64 => wire_type == wire::I64,
            Declared::Binary => wire_type == wire::BINARY,
            Declared::Struct(_) => wire_type == wire::STRUCT,
        };
        if !expected {
            return Err(malformed(format!(
                "field {id} at byte {start} has wire type {wire_type}, not its declared one"
            )));
        }
        match declared {
            Declared::Struct(fields) => self.structure(Some(fields), depth + 1),
            _ => self.value(wire_type, depth),
        }
    }

    /// One value of `wire_type` (a field's or a container element's).
    fn value(&mut self, wire_type: u8, depth: usize) -> Result<(), Incomplete> {
        match wire_type {
            // A field's boolean is its header's type; no byte follows.
            wire::BOOL_TRUE | wire::BOOL_FALSE => Ok(()),
            wire::BYTE => self.skip(1),
            wire::I16 | wire::I32 | wire::I64 => self.varint().map(|_| ()),
            wire::DOUBLE => self.skip(8),
            wire::BINARY => {
                let len = self.varint()?;
                self.skip(len)
            }
            wire::LIST | wire::SET => self.list(depth),
            wire::MAP => self.map(depth),
            wire::STRUCT => self.structure(None, depth + 1),
            wire::UUID => self.skip(16),
            _ => Err(malformed(format!("a value of unknown wire type {wire_type} before byte {}", self.at))),
        }
    }

    fn list(&mut self, depth: usize) -> Result<(), Incomplete> {
        if depth >= MAX_DEPTH {
            return Err(malformed(format!("containers nested more than {MAX_DEPTH} deep at byte {}", self.at)));
        }
        let header = self.byte()?;
        if header == 0 {
            // How some writers write an empty list.
            return Ok(());
        }
        let element = self.element_type(header & 0x0f, "list")?;
        let claimed = match header >> 4 {
            15 => self.varint()?,
            short => u64::from(short),
        };
        for _ in 0..self.container_len(claimed, "list")? {
            self.value(element, depth + 1)?;
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
    use super::*;

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
        let lists = [0x19, 0x19, 0xf1, 0xff, 0xff, 0xff, 0xff, 0x07];
        let problem = check_file_metadata(&lists).unwrap_err();
        assert!(problem.contains("list of booleans"), "{problem}");
        let map = [0x1b, 0x01, 0x15];
        let problem = check_file_metadata(&map).unwrap_err();
        assert!(problem.contains("map of booleans"), "{problem}");
    }

    #[test]
    fn container_lengths_past_the_bytes_or_i32_are_not_accepted() {
        // Field 9 (unknown): a list of 1,000 i32 in 1 byte: more bytes might hold it.
        let short = [0x99, 0xf5, 0xe8, 0x07, 0x00];
        assert_eq!(page_header_len(&short), Err(Incomplete::NeedMore));
        assert!(check_file_metadata(&short).unwrap_err().contains("ends inside"));
        // 2^31 elements: more than the crate reads.
        let huge = [0x99, 0xf5, 0x80, 0x80, 0x80, 0x80, 0x08];
        let Err(Incomplete::Malformed(problem)) = page_header_len(&huge) else { panic!("accepted") };
        assert!(problem.contains("2147483648 elements"), "{problem}");
        // A binary of 2^60 bytes.
        let binary = [0x98, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10, 0x00];
        assert_eq!(page_header_len(&binary), Err(Incomplete::NeedMore));
    }

    #[test]
    fn a_known_field_of_another_wire_type_is_refused() {
        // compressed_page_size (3) written as a binary.
        let bytes = [0x15, 0x00, 0x15, 0x02, 0x18, 0x01, 0x05, 0x00];
        let Err(Incomplete::Malformed(problem)) = page_header_len(&bytes) else { panic!("accepted") };
        assert!(problem.contains("field 3 at byte 4 has wire type 8"), "{problem}");
        // The same in file metadata, checked without a schema, passes.
        assert_eq!(check_file_metadata(&bytes), Ok(()));
    }

    #[test]
    fn deep_nesting_and_long_varints_are_refused() {
        let mut deep = vec![0x1c; MAX_DEPTH + 2];
        deep.extend(vec![0x00; MAX_DEPTH + 3]);
        let problem = check_file_metadata(&deep).unwrap_err();
        assert!(problem.contains("nested"), "{problem}");
        let varint = [0x15, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00];
        let Err(Incomplete::Malformed(problem)) = page_header_len(&varint) else { panic!("accepted") };
        assert!(problem.contains("varint"), "{problem}");
    }
}
