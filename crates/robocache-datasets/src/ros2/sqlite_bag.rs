//! rosbag2's SQLite storage (`.db3`, the default before Iron): tables
//! `topics` (name, type, serialization format), `messages` (topic id, log
//! time in ns, CDR bytes) and, from Iron on, `message_definitions` (the
//! `ros2msg` text of each type). Bags written before Iron carry no
//! definitions: their topics are listed, and reading one is an error that
//! says so.
//!
//! SQLite reads a local file: a remote `.db3` is fetched whole into the
//! node-local cache first (robocache-storage).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use robocache_storage::Storage;
use rusqlite::{Connection, OpenFlags};

use super::bag_file::{BagFile, RawMessage, Topic, Visit};
use super::msg_schema::MessageSchema;
use crate::Result;

#[derive(Debug)]
pub(crate) struct SqliteBag {
    connection: Mutex<Connection>,
    topics: Vec<Topic>,
    /// Topic index → the table's topic id.
    ids: Vec<i64>,
}

impl SqliteBag {
    pub(crate) fn open(path: &Path, storage: &Storage) -> Result<SqliteBag> {
        let bad = |problem: String| crate::Error::Bag { file: path.to_path_buf(), topic: None, message: None, problem };
        let local = storage.local_file(path)?;
        let connection = Connection::open_with_flags(
            &local,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI,
        )
        .map_err(|e| bad(format!("not a SQLite database: {e}")))?;
        let sql = |e: rusqlite::Error| bad(format!("not a rosbag2 SQLite bag: {e}"));
        let definitions: HashMap<String, (String, String)> = {
            let has_table: bool = connection
                .query_row(
                    "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'message_definitions'",
                    [],
                    |row| row.get::<_, i64>(0),
                )
                .map_err(sql)?
                > 0;
            let mut out = HashMap::new();
            if has_table {
                let mut query = connection
                    .prepare("SELECT topic_type, encoding, encoded_message_definition FROM message_definitions")
                    .map_err(sql)?;
                let rows = query
                    .query_map([], |row| {
                        Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?, row.get::<_, String>(2)?))
                    })
                    .map_err(sql)?;
                for row in rows {
                    let (kind, encoding, text) = row.map_err(sql)?;
                    out.insert(kind, (encoding, text));
                }
            }
            out
        };
        let mut topics = Vec::new();
        let mut ids = Vec::new();
        {
            let mut query = connection
                .prepare(
                    "SELECT t.id, t.name, t.type, t.serialization_format, \
                     (SELECT COUNT(*) FROM messages m WHERE m.topic_id = t.id), \
                     (SELECT MIN(timestamp) FROM messages m WHERE m.topic_id = t.id), \
                     (SELECT MAX(timestamp) FROM messages m WHERE m.topic_id = t.id) \
                     FROM topics t ORDER BY t.name",
                )
                .map_err(sql)?;
            let rows = query
                .query_map([], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, i64>(4)?,
                        row.get::<_, Option<i64>>(5)?,
                        row.get::<_, Option<i64>>(6)?,
                    ))
                })
                .map_err(sql)?;
            for row in rows {
                let (id, name, type_name, encoding, count, first, last) = row.map_err(sql)?;
                let schema = match definitions.get(&type_name) {
                    Some((kind, text)) if kind == "ros2msg" => MessageSchema::parse(&type_name, text)
                        .map(Arc::new)
                        .map_err(|e| format!("the `{type_name}` definition: {e}")),
                    Some((kind, _)) => {
                        Err(format!("`{type_name}` is defined as {kind}, and robocache reads ros2msg definitions"))
                    }
                    // Before Iron, rosbag2's SQLite storage kept no
                    // definitions: ROS 2 Humble's, for its standard types.
                    None => match super::standard_definitions::definition(&type_name) {
                        Some(text) => MessageSchema::parse(&type_name, &text)
                            .map(Arc::new)
                            .map_err(|e| format!("the standard `{type_name}` definition: {e}")),
                        None => Err(format!(
                            "the bag carries no definition of `{type_name}` (rosbag2 stores them from Iron on), \
                             and it is not one of ROS 2 Humble's standard types robocache knows"
                        )),
                    },
                };
                let span_ns = first.zip(last).map(|(a, b)| (a.max(0) as u64, b.max(0) as u64));
                topics.push(Topic { name, type_name, encoding, schema, messages: count.max(0) as u64, span_ns });
                ids.push(id);
            }
        }
        super::bag_file::require_cdr(&mut topics);
        Ok(SqliteBag { connection: Mutex::new(connection), topics, ids })
    }
}

impl BagFile for SqliteBag {
    fn storage(&self) -> &'static str {
        "SQLite"
    }

    fn topics(&self) -> &[Topic] {
        &self.topics
    }

    fn read(&self, wanted: &[usize], visit: &mut Visit<'_>) -> std::result::Result<(), String> {
        let connection = self.connection.lock().unwrap_or_else(|p| p.into_inner());
        let by_id: HashMap<i64, usize> = wanted.iter().map(|&t| (self.ids[t], t)).collect();
        let list = by_id.keys().map(i64::to_string).collect::<Vec<_>>().join(",");
        let mut query = connection
            .prepare(&format!("SELECT topic_id, timestamp, data FROM messages WHERE topic_id IN ({list}) ORDER BY id"))
            .map_err(|e| e.to_string())?;
        let mut rows = query.query([]).map_err(|e| e.to_string())?;
        while let Some(row) = rows.next().map_err(|e| e.to_string())? {
            let id: i64 = row.get(0).map_err(|e| e.to_string())?;
            let time: i64 = row.get(1).map_err(|e| e.to_string())?;
            let data = row.get_ref(2).map_err(|e| e.to_string())?;
            let data = data.as_blob().map_err(|_| format!("message of topic id {id} at {time} ns is not a BLOB"))?;
            if let Some(&topic) = by_id.get(&id) {
                let time = u64::try_from(time).map_err(|_| format!("a negative log time {time}"))?;
                visit(RawMessage { topic, log_ns: time, publish_ns: time, data })?;
            }
        }
        Ok(())
    }
}
