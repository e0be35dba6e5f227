//! rosbag2's SQLite storage (`.db3`, the default before Iron): tables
//! `topics` (name, type, serialization format), `messages` (topic id, log
//! time in ns, CDR bytes) and, from Iron on, `message_definitions` (the
//! `ros2msg` text of each type). Bags written before Iron carry no
//! definitions: their topics are listed, and reading one is an error that
//! says so.
//!
//! SQLite reads a local file: a remote `.db3` is fetched whole into the
//! node-local cache first (robocache-storage).
//!
//! A bag is a file from anywhere, so it is opened defensively: read-only,
//! SQLite's defensive mode on and its schema untrusted, `topics` and
//! `messages` must be plain tables (a view, which may recurse forever, or a
//! virtual table is an error that says so), and every query at open runs
//! under a progress handler that ends it past [`open_step_budget`] virtual
//! machine steps. The per-topic counts and time ranges are one
//! `GROUP BY topic_id` scan of `messages`.

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
        let bad = |problem: String| robocache_datasource::Error::Bag {
            file: path.to_path_buf(),
            topic: None,
            message: None,
            problem,
        };
        let local = storage.local_file(path)?;
        let connection = Connection::open_with_flags(
            &local,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI,
        )
        .map_err(|e| bad(format!("not a SQLite database: {e}")))?;
        let mut connection = connection;
        let budget = open_step_budget(std::fs::metadata(&local).map_or(0, |m| m.len()));
        defend(&mut connection, budget).map_err(|e| bad(format!("SQLite's defensive settings: {e}")))?;
        let sql = |e: rusqlite::Error| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::OperationInterrupted) => {
                bad(format!("a query of its tables ran past {budget} SQLite steps (a table that never ends?)"))
            }
            _ => bad(format!("not a rosbag2 SQLite bag: {e}")),
        };
        for table in ["topics", "messages"] {
            let kind: Option<(String, String)> = connection
                .query_row(
                    "SELECT type, COALESCE(sql, '') FROM sqlite_master WHERE name = ?1 COLLATE NOCASE",
                    [table],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .map(Some)
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(None),
                    e => Err(e),
                })
                .map_err(sql)?;
            match kind {
                None => return Err(bad(format!("not a rosbag2 SQLite bag: no table `{table}`"))),
                Some((kind, _)) if kind != "table" => {
                    return Err(bad(format!("`{table}` is a {kind}, not a table (rosbag2 writes tables)")))
                }
                Some((_, text)) if text.trim_start().to_ascii_uppercase().starts_with("CREATE VIRTUAL") => {
                    return Err(bad(format!("`{table}` is a virtual table, not a table (rosbag2 writes tables)")))
                }
                Some(_) => {}
            }
        }
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
        // Each topic's message count and log-time range: one scan.
        let mut per_topic: HashMap<i64, (i64, Option<i64>, Option<i64>)> = HashMap::new();
        {
            let mut query = connection
                .prepare("SELECT topic_id, COUNT(*), MIN(timestamp), MAX(timestamp) FROM messages GROUP BY topic_id")
                .map_err(sql)?;
            let rows = query
                .query_map([], |row| Ok((row.get::<_, i64>(0)?, (row.get(1)?, row.get(2)?, row.get(3)?))))
                .map_err(sql)?;
            for row in rows {
                let (id, stats) = row.map_err(sql)?;
                per_topic.insert(id, stats);
            }
        }
        let mut topics = Vec::new();
        let mut ids = Vec::new();
        {
            let mut query = connection
                .prepare("SELECT id, name, type, serialization_format FROM topics ORDER BY name")
                .map_err(sql)?;
            let rows = query
                .query_map([], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                    ))
                })
                .map_err(sql)?;
            for row in rows {
                let (id, name, type_name, encoding) = row.map_err(sql)?;
                let (count, first, last) = per_topic.get(&id).copied().unwrap_or((0, None, None));
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
        // Reads scan `messages` once, in time linear in it: no step budget.
        connection.progress_handler(0, None::<fn() -> bool>).map_err(sql)?;
        Ok(SqliteBag { connection: Mutex::new(connection), topics, ids })
    }
}

/// The SQLite steps the queries at open may take for a file of `bytes`:
/// 10^9, plus 256 a byte (a real bag's counting scan takes under 20 a
/// byte; SQLite runs about 10^9 steps a few seconds).
pub(crate) fn open_step_budget(bytes: u64) -> u64 {
    1_000_000_000u64.saturating_add(bytes.saturating_mul(256))
}

/// Defensive mode on, the schema untrusted (no function or view of the
/// file's own runs with side effects), and a progress handler that ends any
/// query past `budget` steps.
fn defend(connection: &mut Connection, budget: u64) -> rusqlite::Result<()> {
    use rusqlite::config::DbConfig;
    connection.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    connection.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
    const EVERY: u64 = 10_000;
    let mut steps = 0u64;
    connection.progress_handler(
        EVERY as i32,
        Some(move || {
            steps += EVERY;
            steps > budget
        }),
    )
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
