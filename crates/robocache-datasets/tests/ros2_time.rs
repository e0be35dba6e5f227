//! Time in ROS 2 bags as drivers leave it: a `header.stamp` unset (0) or
//! decades off places its message at its log time (with a warning), and no
//! span of times sizes an allocation: an episode too long for the policy
//! clock is an error naming it. MCAP episodes take their length from the
//! summary, as their SQLite twins do.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use robocache_datasets::{Dataset, OpenOptions, TimeWindowSpec, TimeWindows};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ros2")
}

const MAPPING: &str = "fps = 20\n[streams.state]\ntopic = \"/joint_states\"\nfield = \"position\"\n\
                       joints = [\"j1\", \"j2\", \"j3\"]\ndtype = \"float64\"\n\
                       [streams.action]\ntopic = \"/cmd\"\nfield = \"data\"\ndtype = \"float64\"\n";

fn open(path: &Path) -> robocache_datasets::Result<Dataset> {
    Dataset::open_with(path, &OpenOptions { bag_mapping: Some(MAPPING.parse().unwrap()), ..Default::default() })
}

/// `arm_mcap` rewritten by the `mcap` crate, each message passed through
/// `edit(topic, index on its topic, message)`.
fn rewrite(to: &Path, edit: &dyn Fn(&str, usize, &mut mcap::Message<'_>)) {
    let bytes = std::fs::read(fixtures().join("arm_mcap/arm_mcap.mcap")).unwrap();
    let mut writer = mcap::Writer::new(std::io::BufWriter::new(std::fs::File::create(to).unwrap())).unwrap();
    let mut counts = std::collections::HashMap::new();
    for message in mcap::MessageStream::new(&bytes).unwrap() {
        let mut message = message.unwrap();
        let topic = message.channel.topic.clone();
        let index = counts.entry(topic.clone()).or_insert(0usize);
        edit(&topic, *index, &mut message);
        *index += 1;
        writer.write(&message).unwrap();
    }
    writer.finish().unwrap();
}

/// The log times (ns) of `/joint_states`, and the bag's first log time.
fn log_times() -> (Vec<u64>, u64) {
    let bytes = std::fs::read(fixtures().join("arm_mcap/arm_mcap.mcap")).unwrap();
    let mut joints = Vec::new();
    let mut first = u64::MAX;
    for message in mcap::MessageStream::new(&bytes).unwrap() {
        let message = message.unwrap();
        first = first.min(message.log_time);
        if message.channel.topic == "/joint_states" {
            joints.push(message.log_time);
        }
    }
    (joints, first)
}

/// A JointState's stamp (`sec`, `nanosec` after the 4-byte CDR header) set.
fn set_stamp(message: &mut mcap::Message<'_>, sec: i32, nanosec: u32) {
    let mut data = message.data.to_vec();
    assert_eq!(data[1], 1, "little-endian CDR");
    data[4..8].copy_from_slice(&sec.to_le_bytes());
    data[8..12].copy_from_slice(&nanosec.to_le_bytes());
    message.data = Cow::Owned(data);
}

#[test]
fn an_unset_or_decades_off_header_stamp_places_its_message_at_its_log_time() {
    let dir = tempfile::tempdir().unwrap();
    let original = open(&fixtures().join("arm_mcap")).unwrap();
    let spec = TimeWindowSpec { hz: 20.0, history: 2, horizon: 4, causal: false };
    let windows = TimeWindows::new(&original, &[], &spec).unwrap().len();
    let (logged, origin) = log_times();
    let path = dir.path().join("stamps.mcap");
    // Message 5 unset (0 s), message 9 thirty years behind, message 12 one
    // minute and a nanosecond behind its log time (past the bound).
    rewrite(&path, &|topic, index, message| {
        if topic != "/joint_states" {
            return;
        }
        let log = message.log_time;
        match index {
            5 => set_stamp(message, 0, 0),
            9 => set_stamp(message, (log / 1_000_000_000) as i32 - 946_080_000, 0),
            12 => {
                let stamp = log - 60_000_000_001;
                set_stamp(message, (stamp / 1_000_000_000) as i32, (stamp % 1_000_000_000) as u32)
            }
            _ => {}
        }
    });
    let dataset = open(&path).unwrap();
    // The same windows as the original: no stamp sized the episode.
    assert_eq!(TimeWindows::new(&dataset, &[], &spec).unwrap().len(), windows);
    let times = dataset.times(0, "state").unwrap();
    let times: Vec<f64> = (0..times.len()).map(|i| times.time(i)).collect();
    let original_times = original.times(0, "state").unwrap();
    assert_eq!(times.len(), original_times.len());
    let (first, last) = (times[0], times[times.len() - 1]);
    assert!(first > -0.01 && last < 2.01, "times run {first} to {last} s");
    for k in [5usize, 9, 12] {
        let at_log = (logged[k] - origin) as f64 * 1e-9;
        assert!(times.contains(&at_log), "message {k} is not at its log time {at_log} s: {times:?}");
    }
    // A stamp within the bound still places its message: the others are the original's.
    let kept: Vec<f64> = (0..original_times.len()).map(|i| original_times.time(i)).collect();
    let unchanged = kept.iter().filter(|t| times.contains(t)).count();
    assert!(unchanged >= kept.len() - 3, "{unchanged} of {} times kept", kept.len());
}

#[test]
fn an_episode_too_long_for_the_clock_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("decades.mcap");
    // One `/cmd` message (log time only) logged forty years later.
    rewrite(&path, &|topic, index, message| {
        if topic == "/cmd" && index == 3 {
            message.log_time += 40 * 365 * 86_400 * 1_000_000_000;
            message.publish_time = message.log_time;
        }
    });
    let error = open(&path).unwrap_err().to_string();
    assert!(error.contains("decades.mcap") && error.contains("at most 33554432 an episode"), "{error}");
    // Windows over a span too long for their clock: an error naming the episode.
    let dataset = open(&fixtures().join("arm_mcap")).unwrap();
    let spec = TimeWindowSpec { hz: 1e9, history: 0, horizon: 1, causal: false };
    let error = TimeWindows::new(&dataset, &[], &spec).unwrap_err().to_string();
    assert!(error.contains("episode 0") && error.contains("at most 33554432 an episode"), "{error}");
}

#[test]
fn an_mcap_episode_has_its_length_from_the_summary_as_its_sqlite_twin() {
    let mcap = open(&fixtures().join("arm_mcap")).unwrap();
    let sqlite = open(&fixtures().join("arm_sqlite")).unwrap();
    let (a, b) = (&mcap.info().episodes[0], &sqlite.info().episodes[0]);
    assert!(a.len > 30 && a.duration_s > 1.5, "MCAP: len {} over {} s", a.len, a.duration_s);
    assert_eq!((a.len, a.duration_s), (b.len, b.duration_s));
}
