//! Fuzzing the deployment contract: loader specs of every clock kind
//! (causal and non-causal time windows, `delta_timestamps`, a mixture
//! member's, a ROS 2 bag's mapping and topics) with fields replaced by hostile values, removed or
//! added, loaded by `LoaderSpec::from_json`; those that load are made into a
//! `Live` and given pushes and windows. Sequences of pushes, windows and
//! resets on a live window (random streams, times, shapes, dtypes, NaN and
//! ±inf values and times). Whatever the input: a window or an error that
//! says what is wrong, within a second, never a panic or a hang.
//! `PROPTEST_CASES` sets how many (CI runs thousands, `.ci/run`).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use proptest::prelude::*;
use robocache::datasets::synthetic::{write_robomimic, SyntheticSpec};
use robocache::datasets::{Dataset, OpenOptions, TimeWindowSpec};
use robocache::live::{Live, LiveOptions};
use robocache::loader::{Normalization, NormalizationMode};
use robocache::{Device, FrameResize, HostSlice, Loader, LoaderConfig, LoaderSpec, WindowSpec};
use serde_json::Value;

/// What every case must end within.
const DEADLINE: Duration = Duration::from_secs(1);

/// `work`'s answer within [`DEADLINE`], else a failure (a hang); a panic
/// of the worker fails the case.
fn within_deadline<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    robocache_video::testing::within(DEADLINE, what, work)
}

const STREAMS: [&str; 5] =
    ["actions", "obs/joint_pos", "obs/robot0_eef_quat", "obs/gripper_closed", "obs/agentview_image"];

/// The specs every case starts from: time windows (causal, normalized,
/// frames resized; non-causal), `delta_timestamps`, a mixture member's
/// and a ROS 2 bag's.
fn base_specs() -> &'static [String] {
    static SPECS: OnceLock<Vec<String>> = OnceLock::new();
    SPECS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fuzz.hdf5");
        let spec = SyntheticSpec { episodes: 2, mean_steps: 16, image: Some([12, 16]), seed: 3, ..Default::default() };
        write_robomimic(&path, &spec).unwrap();
        let dataset = Arc::new(Dataset::open(&path).unwrap());
        let mut out = Vec::new();
        for causal in [true, false] {
            let windows = WindowSpec::Times(TimeWindowSpec { hz: 30.0, history: 2, horizon: 3, causal });
            let mut config = LoaderConfig::new(&STREAMS, windows, 4);
            config.normalization =
                Some(Normalization::compute(&dataset, &STREAMS[..4], NormalizationMode::ZScore).unwrap());
            config.frames.resize = Some(FrameResize::to(8, 6));
            let loader = Loader::new(&Device::Cpu, dataset.clone(), config).unwrap();
            out.push(loader.spec().unwrap().to_json().unwrap());
        }
        // delta_timestamps: the time spec's clock swapped, as a LeRobot loader writes it.
        let mut deltas: Value = serde_json::from_str(&out[0]).unwrap();
        deltas["clock"] = serde_json::json!({
            "kind": "deltas", "fps": 20.0, "tolerance_s": 0.0001,
            "offsets": [["obs/joint_pos", [-0.1, -0.05, 0.0]], ["obs/agentview_image", [-0.05, 0.0]]]
        });
        deltas["masks"] = "pad".into();
        deltas["normalization"] = Value::Null;
        out.push(serde_json::to_string_pretty(&deltas).unwrap());
        // A mixture member's: the mixture's streams made of its own.
        let mut member: Value = serde_json::from_str(&out[0]).unwrap();
        member["mixture"] = serde_json::json!({
            "member": "arm", "statistics": null,
            "streams": [
                {"name": "state", "source": {"kind": "concat", "streams": ["obs/joint_pos", "obs/gripper_closed"]},
                 "dtype": "f32", "step_shape": [9], "width": 9},
                {"name": "quat", "source": {"kind": "constant", "values": [0.0, 0.0, 0.0, 1.0]},
                 "dtype": "f32", "step_shape": [4], "width": 4},
                {"name": "camera", "source": {"kind": "absent"}, "dtype": "f32", "step_shape": [3, 6, 8], "width": 8}
            ]
        });
        out.push(serde_json::to_string_pretty(&member).unwrap());
        // A ROS 2 bag's, with its mapping and topic definitions.
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../robocache-datasets/tests/fixtures/ros2/arm_mcap");
        let mapping = "[streams.state]\ntopic = \"/joint_states\"\nfield = \"position\"\njoints = [\"j1\", \"j2\"]\n\
                       [streams.gripper]\ntopic = \"/gripper\"\nfield = \"data\"\n";
        let options = OpenOptions { bag_mapping: Some(mapping.parse().unwrap()), ..Default::default() };
        let bag = Arc::new(Dataset::open_with(&root, &options).unwrap());
        let windows = WindowSpec::Times(TimeWindowSpec { hz: 15.0, history: 3, horizon: 2, causal: true });
        let loader = Loader::new(&Device::Cpu, bag, LoaderConfig::new(&["state", "gripper"], windows, 4)).unwrap();
        out.push(loader.spec().unwrap().to_json().unwrap());
        out
    })
}

/// Values that break assumptions: huge, negative, zero, non-finite as
/// strings, wrong types, long arrays.
fn hostile(choice: usize) -> Value {
    match choice % 16 {
        0 => serde_json::json!(1e300),
        1 => serde_json::json!(-1),
        2 => serde_json::json!(0),
        3 => Value::Null,
        4 => serde_json::json!("NaN"),
        5 => serde_json::json!(u64::MAX),
        6 => serde_json::json!([]),
        7 => serde_json::json!({}),
        8 => serde_json::json!(1e-300),
        9 => serde_json::json!(vec![1usize << 20; 3]),
        10 => serde_json::json!([100000, 100000]),
        11 => serde_json::json!(true),
        12 => serde_json::json!("obs/joint_pos"),
        13 => serde_json::json!(4_000_000_000u64),
        14 => serde_json::json!([[-1e9, 0.0]]),
        _ => serde_json::json!(65536),
    }
}

/// Every JSON pointer in `value`.
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                pointers(item, format!("{at}/{}", key.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                pointers(item, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// The spec `base` with `edits` applied: (where, what) — a value replaced
/// by a hostile one, a key removed, an unknown key added.
fn edited_spec(base: usize, edits: &[(usize, usize)]) -> String {
    let specs = base_specs();
    let mut spec: Value = serde_json::from_str(&specs[base % specs.len()]).unwrap();
    for &(place, what) in edits {
        let mut all = Vec::new();
        pointers(&spec, String::new(), &mut all);
        // Mostly the spec's structure, not the numbers of its statistics
        // (most of its values, which a hostile value makes refused at once).
        let structure: Vec<String> = all.iter().filter(|p| !p.contains("/normalization/streams/")).cloned().collect();
        let pool = if what % 4 == 0 { &all } else { &structure };
        let pointer = &pool[place % pool.len()];
        if pointer.is_empty() {
            continue;
        }
        match what % 5 {
            0 => {
                // Remove the key (or the array item).
                let (parent, last) = pointer.rsplit_once('/').unwrap();
                match spec.pointer_mut(parent) {
                    Some(Value::Object(map)) => {
                        map.remove(&last.replace("~1", "/").replace("~0", "~"));
                    }
                    Some(Value::Array(items)) => {
                        if let Ok(i) = last.parse::<usize>() {
                            if i < items.len() {
                                items.remove(i);
                            }
                        }
                    }
                    _ => {}
                }
            }
            1 => {
                if let Some(Value::Object(map)) = spec.pointer_mut(pointer) {
                    map.insert("surprise".into(), Value::from(1));
                }
            }
            _ => {
                if let Some(slot) = spec.pointer_mut(pointer) {
                    *slot = hostile(what / 5);
                }
            }
        }
    }
    serde_json::to_string(&spec).unwrap()
}

/// Loads `text`; a spec that loads is made into a live window on the CPU,
/// given a sample of every stream and asked for a window. The error text
/// of whatever failed (never empty), or none.
fn load_and_use(text: String) -> Option<String> {
    let spec = match LoaderSpec::from_json(&text) {
        Ok(spec) => spec,
        Err(error) => return Some(error.to_string()),
    };
    let live = match Live::new(&spec, &Device::Cpu, &LiveOptions::default()) {
        Ok(live) => live,
        Err(error) => return Some(error.to_string()),
    };
    let mut last = None;
    for stream in &spec.streams {
        let shape = stream.camera.map_or(stream.step_shape.iter().product(), |(w, h)| w * h * 3);
        let values = vec![0u8; shape.min(1 << 22)];
        let floats = vec![0.5f32; shape.min(1 << 22)];
        let slice = if stream.camera.is_some() { HostSlice::U8(&values) } else { HostSlice::F32(&floats) };
        if let Err(error) = live.push(&stream.name, 0.25, slice) {
            last = Some(error.to_string());
        }
    }
    match live.window(0.25) {
        Ok(_) => last,
        Err(error) => Some(error.to_string()),
    }
}

/// Enough mutated specs load that the fuzz cases reach live windows: a
/// harness whose every case stopped at the parser would prove little.
#[test]
fn a_share_of_mutated_specs_load_and_run() {
    let mut rng = robocache_cpu::noise::XorShift::new(7);
    let (mut loaded, cases) = (0, 400);
    for case in 0..cases {
        let edits = [(rng.next_u64() as usize, rng.next_u64() as usize)];
        let text = edited_spec(case, &edits);
        if LoaderSpec::from_json(&text).is_ok() {
            loaded += 1;
            load_and_use(text);
        }
    }
    assert!(loaded * 10 >= cases, "{loaded} of {cases} mutated specs loaded");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Mutated specs of every clock kind load or are refused naming the
    /// field; those that load give windows or errors.
    #[test]
    fn mutated_specs_load_or_fail_clearly(
        base in 0usize..5,
        edits in prop::collection::vec((any::<usize>(), any::<usize>()), 1..4),
    ) {
        let text = edited_spec(base, &edits);
        let what = format!("the spec {text}");
        let error = within_deadline(&what, move || load_and_use(text));
        if let Some(error) = error {
            prop_assert!(!error.trim().is_empty(), "{}: an empty error", what);
        }
    }
}

/// One step of a push sequence.
#[derive(Clone, Debug)]
enum Step {
    Push { stream: usize, time: usize, shape: usize, dtype: usize, value: usize },
    Window { time: usize },
    Reset { origin: Option<u64> },
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        6 => (any::<usize>(), any::<usize>(), any::<usize>(), any::<usize>(), any::<usize>())
            .prop_map(|(stream, time, shape, dtype, value)| Step::Push { stream, time, shape, dtype, value }),
        3 => any::<usize>().prop_map(|time| Step::Window { time }),
        1 => prop::option::of(any::<u64>()).prop_map(|origin| Step::Reset { origin }),
    ];
    prop::collection::vec(step, 1..60)
}

/// Times that come in order, repeat, go back, jump, or are not finite.
fn time_of(choice: usize, clock: &mut f64) -> f64 {
    match choice % 10 {
        0 => f64::NAN,
        1 => f64::INFINITY,
        2 => *clock,
        3 => *clock - 0.5,
        4 => {
            *clock += 1000.0;
            *clock
        }
        5 => -1e300,
        _ => {
            *clock += 0.001 * (1 + choice % 97) as f64;
            *clock
        }
    }
}

fn run_steps(spec: usize, steps: Vec<Step>) -> Option<String> {
    let specs = base_specs();
    let spec = LoaderSpec::from_json(&specs[spec % specs.len()]).unwrap_or_else(|e| panic!("base spec {spec}: {e}"));
    let names: Vec<String> = spec.streams.iter().map(|s| s.name.clone()).chain(["obs/elbow".to_owned()]).collect();
    let live = match Live::new(&spec, &Device::Cpu, &LiveOptions::default()) {
        Ok(live) => live,
        Err(error) => return Some(error.to_string()),
    };
    let mut clock = 0.0;
    let mut last = None;
    for step in steps {
        let result = match step {
            Step::Push { stream, time, shape, dtype, value } => {
                let name = &names[stream % names.len()];
                let want =
                    spec.stream(name).map_or(7, |s| s.camera.map_or(s.step_shape.iter().product(), |(w, h)| w * h * 3));
                let len = match shape % 4 {
                    0 => want.saturating_sub(1),
                    1 => want + 1,
                    _ => want,
                };
                let v = [0.25, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1e300][value % 5];
                let t = time_of(time, &mut clock);
                match dtype % 5 {
                    0 => live.push(name, t, HostSlice::F64(&vec![v; len])),
                    1 => live.push(name, t, HostSlice::U8(&vec![value as u8; len])),
                    2 => live.push(name, t, HostSlice::I32(&vec![value as i32; len])),
                    3 => live.push_encoded(name, t, &[0xFF, 0xD8, 0xFF, value as u8]),
                    _ => live.push(name, t, HostSlice::F32(&vec![v as f32; len])),
                }
            }
            Step::Window { time } => live.window(time_of(time, &mut clock)).map(drop),
            Step::Reset { origin } => live.reset(origin),
        };
        if let Err(error) = result {
            last = Some(error.to_string());
        }
    }
    last
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random pushes, windows and resets: each a window or an error.
    #[test]
    fn push_sequences_give_windows_or_errors(spec in 0usize..5, steps in steps()) {
        let what = format!("spec {spec} with {steps:?}");
        let error = within_deadline(&what, move || run_steps(spec, steps));
        if let Some(error) = error {
            prop_assert!(!error.trim().is_empty(), "{}: an empty error", what);
        }
    }
}
