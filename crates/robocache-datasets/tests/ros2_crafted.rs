//! Bags crafted to cost what their bytes do not: SQLite tables that are
//! recursive views, an MCAP whose summary leaves out its channels, a raw
//! image whose first message claims a size its data does not hold, a topic
//! named to climb out of a LeRobot root. Each reads right or is an error
//! that says why, in well under a second.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use robocache_datasets::{Dataset, OpenOptions};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ros2")
}

fn open(path: &Path) -> robocache_datasets::Result<Dataset> {
    Dataset::open_with(path, &OpenOptions::default())
}

#[test]
fn sqlite_views_in_place_of_the_tables_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    for (table, other) in [("messages", "topics"), ("topics", "messages")] {
        let path = dir.path().join(format!("view_{table}.db3"));
        let connection = rusqlite::Connection::open(&path).unwrap();
        let other_columns = match other {
            "topics" => "id INTEGER PRIMARY KEY, name TEXT, type TEXT, serialization_format TEXT",
            _ => "id INTEGER PRIMARY KEY, topic_id INTEGER, timestamp INTEGER, data BLOB",
        };
        connection.execute_batch(&format!("CREATE TABLE {other} ({other_columns});")).unwrap();
        // A view that counts forever: `SELECT` from it never ends.
        connection
            .execute_batch(&format!(
                "CREATE VIEW {table} AS WITH RECURSIVE n(id) AS (SELECT 1 UNION ALL SELECT id + 1 FROM n) \
                 SELECT id, id AS topic_id, id AS timestamp, x'00' AS data, 'a' AS name, 'b' AS type, \
                 'cdr' AS serialization_format FROM n;"
            ))
            .unwrap();
        drop(connection);
        let started = Instant::now();
        let error = open(&path).unwrap_err().to_string();
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        assert!(error.contains(&format!("`{table}` is a view, not a table")), "{error}");
    }
}

#[test]
fn an_mcap_summary_without_its_channels_reads_them_from_the_data_section() {
    // The fixture rewritten with a summary of statistics and chunk indexes
    // but no channel or schema records (valid: MCAP makes them optional).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no_summary_channels.mcap");
    let bytes = std::fs::read(fixtures().join("arm_mcap/arm_mcap.mcap")).unwrap();
    let options = mcap::WriteOptions::new().repeat_channels(false).repeat_schemas(false);
    let mut writer = options.create(std::io::BufWriter::new(std::fs::File::create(&path).unwrap())).unwrap();
    for message in mcap::MessageStream::new(&bytes).unwrap() {
        writer.write(&message.unwrap()).unwrap();
    }
    writer.finish().unwrap();
    drop(writer);
    let original = open(&fixtures().join("arm_mcap")).unwrap();
    let rewritten = open(&path).unwrap();
    let names = |d: &Dataset| d.info().episodes[0].streams.iter().map(|s| (s.name.clone(), s.len)).collect::<Vec<_>>();
    assert_eq!(names(&rewritten), names(&original));
    assert!(!names(&rewritten).is_empty());
    let warnings = rewritten.info().metadata.get("warnings").map(ToString::to_string).unwrap_or_default();
    assert!(warnings.contains("no channel record"), "{warnings}");
    let key = &original.info().episodes[0].streams[0].name;
    assert_eq!(
        format!("{:?}", rewritten.read_stream(0, key).unwrap()),
        format!("{:?}", original.read_stream(0, key).unwrap())
    );
}

#[test]
fn a_topic_named_to_climb_out_of_the_root_is_refused_before_anything_is_written() {
    use robocache_datasets::{CameraStorage, LeRobotFeatureToWrite as FeatureToWrite, LeRobotWriter};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("out/root");
    for name in ["../../../x", "/abs", "a//b", "a/./b", "a\\b", "nul\0"] {
        let feature =
            FeatureToWrite { name: name.into(), dtype: robocache_cpu::DType::U8, shape: vec![16, 16, 3], names: None };
        let error =
            LeRobotWriter::create(&root, 30.0, vec![feature], None, CameraStorage::Image).err().unwrap().to_string();
        assert!(error.contains("give the stream another key"), "{name:?}: {error}");
    }
    assert!(!dir.path().join("x").exists() && !root.exists(), "nothing written");
}

/// `open` takes an MCAP's spans and counts from its summary and reads only
/// the chunks holding each mapped topic's first message: the same bag
/// written in many small chunks, its last chunk's records overwritten,
/// opens with every stream's length, and the damage shows only when the
/// rows are read, as an error naming the file.
#[test]
fn an_mcap_opens_from_its_summary_without_reading_its_later_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chunked.mcap");
    let bytes = std::fs::read(fixtures().join("arm_mcap/arm_mcap.mcap")).unwrap();
    let options = mcap::WriteOptions::new().compression(None).chunk_size(Some(2048));
    let mut writer = options.create(std::io::BufWriter::new(std::fs::File::create(&path).unwrap())).unwrap();
    for message in mcap::MessageStream::new(&bytes).unwrap() {
        writer.write(&message.unwrap()).unwrap();
    }
    writer.finish().unwrap();
    drop(writer);
    let mut written = std::fs::read(&path).unwrap();
    let summary = mcap::Summary::read(&written).unwrap().unwrap();
    assert!(summary.chunk_indexes.len() > 4, "{} chunks", summary.chunk_indexes.len());
    let last = summary.chunk_indexes.last().unwrap();
    // Past the chunk's header (opcode, length, times, sizes, crc, compression
    // string), its records: overwritten with bytes that are no record.
    let records = last.chunk_start_offset as usize + 9 + 8 * 3 + 4 + 4 + 8;
    let end = (last.chunk_start_offset + last.chunk_length) as usize;
    written[records..end].fill(0xff);
    std::fs::write(&path, &written).unwrap();
    let original = open(&fixtures().join("arm_mcap")).unwrap();
    let damaged = open(&path).expect("open reads the summary and the first chunks only");
    let lens = |d: &Dataset| d.info().episodes[0].streams.iter().map(|s| (s.name.clone(), s.len)).collect::<Vec<_>>();
    assert_eq!(lens(&damaged), lens(&original));
    let read = damaged.info().episodes[0].streams.iter().map(|s| damaged.read_stream(0, &s.name)).find_map(Result::err);
    let error = read.expect("a stream with messages in the last chunk fails to read").to_string();
    assert!(error.contains("chunked.mcap"), "{error}");
}
