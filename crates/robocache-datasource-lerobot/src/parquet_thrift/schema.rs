//! The Thrift structures of parquet-format (`parquet.thrift`) that the
//! `parquet` crate (60.1) decodes by their declared types: the page header
//! and the file metadata, every field the crate reads (fields it skips may
//! be listed too: a declared field is only held to its framing).

/// What a known field holds, as far as its bytes on the wire go.
#[derive(Clone, Copy, Debug)]
pub(super) enum Declared {
    Bool,
    /// `i8`: one byte.
    Byte,
    /// `i16`, `i32`, `i64` and enums: a zigzag varint.
    Varint,
    Double,
    /// `binary` and `string`.
    Binary,
    List(&'static Declared),
    /// A structure or a union (a union is a structure of one field).
    Struct(&'static [Field]),
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Field {
    pub id: i16,
    pub declared: Declared,
}

const fn field(id: i16, declared: Declared) -> Field {
    Field { id, declared }
}

use Declared::{Binary, Bool, Byte, Double, List, Struct, Varint};

const EMPTY: &[Field] = &[];

// Page headers.

const STATISTICS: &[Field] = &[
    field(1, Binary),
    field(2, Binary),
    field(3, Varint),
    field(4, Varint),
    field(5, Binary),
    field(6, Binary),
    field(7, Bool),
    field(8, Bool),
    field(9, Varint),
];
const DATA_PAGE_HEADER: &[Field] =
    &[field(1, Varint), field(2, Varint), field(3, Varint), field(4, Varint), field(5, Struct(STATISTICS))];
const DICTIONARY_PAGE_HEADER: &[Field] = &[field(1, Varint), field(2, Varint), field(3, Bool)];
const DATA_PAGE_HEADER_V2: &[Field] = &[
    field(1, Varint),
    field(2, Varint),
    field(3, Varint),
    field(4, Varint),
    field(5, Varint),
    field(6, Varint),
    field(7, Bool),
    field(8, Struct(STATISTICS)),
];
pub(super) const PAGE_HEADER: &[Field] = &[
    field(1, Varint),
    field(2, Varint),
    field(3, Varint),
    field(4, Varint),
    field(5, Struct(DATA_PAGE_HEADER)),
    field(6, Struct(EMPTY)),
    field(7, Struct(DICTIONARY_PAGE_HEADER)),
    field(8, Struct(DATA_PAGE_HEADER_V2)),
];

// File metadata.

const DECIMAL_TYPE: &[Field] = &[field(1, Varint), field(2, Varint)];
const TIME_UNIT: &[Field] = &[field(1, Struct(EMPTY)), field(2, Struct(EMPTY)), field(3, Struct(EMPTY))];
const TIME_TYPE: &[Field] = &[field(1, Bool), field(2, Struct(TIME_UNIT))];
const INT_TYPE: &[Field] = &[field(1, Byte), field(2, Bool)];
const VARIANT_TYPE: &[Field] = &[field(1, Byte)];
const GEOMETRY_TYPE: &[Field] = &[field(1, Binary)];
const GEOGRAPHY_TYPE: &[Field] = &[field(1, Binary), field(2, Varint)];
const LOGICAL_TYPE: &[Field] = &[
    field(1, Struct(EMPTY)),
    field(2, Struct(EMPTY)),
    field(3, Struct(EMPTY)),
    field(4, Struct(EMPTY)),
    field(5, Struct(DECIMAL_TYPE)),
    field(6, Struct(EMPTY)),
    field(7, Struct(TIME_TYPE)),
    field(8, Struct(TIME_TYPE)),
    field(10, Struct(INT_TYPE)),
    field(11, Struct(EMPTY)),
    field(12, Struct(EMPTY)),
    field(13, Struct(EMPTY)),
    field(14, Struct(EMPTY)),
    field(15, Struct(EMPTY)),
    field(16, Struct(VARIANT_TYPE)),
    field(17, Struct(GEOMETRY_TYPE)),
    field(18, Struct(GEOGRAPHY_TYPE)),
    field(19, Struct(EMPTY)),
];
const SCHEMA_ELEMENT: &[Field] = &[
    field(1, Varint),
    field(2, Varint),
    field(3, Varint),
    field(4, Binary),
    field(5, Varint),
    field(6, Varint),
    field(7, Varint),
    field(8, Varint),
    field(9, Varint),
    field(10, Struct(LOGICAL_TYPE)),
];
const KEY_VALUE: &[Field] = &[field(1, Binary), field(2, Binary)];
const PAGE_ENCODING_STATS: &[Field] = &[field(1, Varint), field(2, Varint), field(3, Varint)];
const SIZE_STATISTICS: &[Field] = &[field(1, Varint), field(2, List(&Varint)), field(3, List(&Varint))];
const BOUNDING_BOX: &[Field] = &[
    field(1, Double),
    field(2, Double),
    field(3, Double),
    field(4, Double),
    field(5, Double),
    field(6, Double),
    field(7, Double),
    field(8, Double),
];
const GEOSPATIAL_STATISTICS: &[Field] = &[field(1, Struct(BOUNDING_BOX)), field(2, List(&Varint))];
const COLUMN_META_DATA: &[Field] = &[
    field(1, Varint),
    field(2, List(&Varint)),
    field(3, List(&Binary)),
    field(4, Varint),
    field(5, Varint),
    field(6, Varint),
    field(7, Varint),
    field(8, List(&Struct(KEY_VALUE))),
    field(9, Varint),
    field(10, Varint),
    field(11, Varint),
    field(12, Struct(STATISTICS)),
    field(13, List(&Struct(PAGE_ENCODING_STATS))),
    field(14, Varint),
    field(15, Varint),
    field(16, Struct(SIZE_STATISTICS)),
    field(17, Struct(GEOSPATIAL_STATISTICS)),
];
const ENCRYPTION_WITH_COLUMN_KEY: &[Field] = &[field(1, List(&Binary)), field(2, Binary)];
const COLUMN_CRYPTO_META_DATA: &[Field] = &[field(1, Struct(EMPTY)), field(2, Struct(ENCRYPTION_WITH_COLUMN_KEY))];
const COLUMN_CHUNK: &[Field] = &[
    field(1, Binary),
    field(2, Varint),
    field(3, Struct(COLUMN_META_DATA)),
    field(4, Varint),
    field(5, Varint),
    field(6, Varint),
    field(7, Varint),
    field(8, Struct(COLUMN_CRYPTO_META_DATA)),
    field(9, Binary),
];
const SORTING_COLUMN: &[Field] = &[field(1, Varint), field(2, Bool), field(3, Bool)];
const ROW_GROUP: &[Field] = &[
    field(1, List(&Struct(COLUMN_CHUNK))),
    field(2, Varint),
    field(3, Varint),
    field(4, List(&Struct(SORTING_COLUMN))),
    field(5, Varint),
    field(6, Varint),
    field(7, Varint),
];
const COLUMN_ORDER: &[Field] = &[field(1, Struct(EMPTY)), field(2, Struct(EMPTY)), field(3, Struct(EMPTY))];
const AES_GCM: &[Field] = &[field(1, Binary), field(2, Binary), field(3, Bool)];
const ENCRYPTION_ALGORITHM: &[Field] = &[field(1, Struct(AES_GCM)), field(2, Struct(AES_GCM))];
pub(super) const FILE_META_DATA: &[Field] = &[
    field(1, Varint),
    field(2, List(&Struct(SCHEMA_ELEMENT))),
    field(3, Varint),
    field(4, List(&Struct(ROW_GROUP))),
    field(5, List(&Struct(KEY_VALUE))),
    field(6, Binary),
    field(7, List(&Struct(COLUMN_ORDER))),
    field(8, Struct(ENCRYPTION_ALGORITHM)),
    field(9, Binary),
];
