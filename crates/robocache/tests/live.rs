//! Live windows against training: recorded episodes pushed sample by sample
//! in time order, as a robot delivers them, give at every anchor the
//! loader's window bit for bit (causal time windows at once, non-causal ones
//! a lag behind, `delta_timestamps` on a LeRobot root with video, a ROS 2
//! bag opened with a mapping); specs
//! round-trip through their file; bad input is refused naming the stream.
//! Each body runs on the CPU and, where one answers, on CUDA.

use std::path::Path;
use std::sync::Arc;

use robocache::datasets::synthetic::{write_robomimic, SyntheticSpec};
use robocache::datasets::{Dataset, DeltaTimestamps, TimeWindowSpec};
use robocache::live::{Live, LiveOptions, LiveWindow};
use robocache::loader::{MaskKind, Normalization, NormalizationMode};
use robocache::{
    Device, Error, FrameDType, FrameLayout, FrameOutput, FrameResize, HostSlice, HostVec, Loader, LoaderConfig,
    LoaderSpec, WindowBatch, WindowSpec,
};

const STREAMS: [&str; 5] =
    ["actions", "obs/joint_pos", "obs/robot0_eef_quat", "obs/gripper_closed", "obs/agentview_image"];

fn synthetic(dir: &Path) -> Arc<Dataset> {
    let path = dir.join("live.hdf5");
    let spec = SyntheticSpec { episodes: 2, mean_steps: 24, image: Some([12, 16]), seed: 5, ..Default::default() };
    write_robomimic(&path, &spec).unwrap();
    Arc::new(Dataset::open(&path).unwrap())
}

/// Every sample of `streams` in `episode`, in time order: `(time, stream, row)`.
fn recording(dataset: &Dataset, episode: usize, streams: &[&str]) -> Vec<(f64, String, HostVec)> {
    let mut events = Vec::new();
    for &name in streams {
        let times = dataset.times(episode, name).unwrap();
        let rows = dataset.read_stream(episode, name).unwrap();
        let (_, info) = dataset.stream(episode, name).unwrap();
        let step = info.step_bytes();
        let bytes = rows.as_slice().as_bytes().to_vec();
        for (i, row) in bytes.chunks_exact(step).enumerate() {
            events.push((times.time(i), name.to_owned(), host_row(info.dtype, row)));
        }
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    events
}

fn host_row(dtype: robocache::DType, bytes: &[u8]) -> HostVec {
    let mut row = HostVec::zeros(dtype, bytes.len() / dtype.size_in_bytes());
    row.as_bytes_mut().unwrap().copy_from_slice(bytes);
    row
}

/// Row `b` of a training batch's stream `name`, its first `steps` steps:
/// (data bytes, mask).
fn training_row(batch: &WindowBatch, name: &str, b: usize, steps: usize) -> (Vec<u8>, Vec<bool>) {
    let stream = batch.stream(name).unwrap();
    let shape = stream.data.shape();
    let per_step: usize = shape[2..].iter().product::<usize>() * stream.data.dtype().size_in_bytes();
    let data = stream.data.to_host().unwrap();
    let row = &data.as_slice().as_bytes()[b * shape[1] * per_step..][..steps * per_step];
    let mask = stream.mask.to_vec::<bool>().unwrap();
    (row.to_vec(), mask[b * shape[1]..][..steps].to_vec())
}

fn live_row(window: &LiveWindow, name: &str) -> (Vec<u8>, Vec<bool>) {
    let stream = window.stream(name).unwrap();
    (stream.data.to_host().unwrap().as_slice().as_bytes().to_vec(), stream.mask.to_vec::<bool>().unwrap())
}

fn time_loader(device: &Device, dataset: &Arc<Dataset>, causal: bool) -> Loader {
    let windows = WindowSpec::Times(TimeWindowSpec { hz: 30.0, history: 2, horizon: 4, causal });
    let mut config = LoaderConfig::new(&STREAMS, windows, 8);
    config.masks = MaskKind::Pad;
    config.shuffle = false;
    config.normalization = Some(Normalization::compute(dataset, &STREAMS[..4], NormalizationMode::ZScore).unwrap());
    config.frames =
        FrameOutput { layout: FrameLayout::Chw, dtype: FrameDType::F32, resize: Some(FrameResize::to(8, 6)) };
    Loader::new(device, dataset.clone(), config).unwrap()
}

/// The spec through its file, as a deployment loads it.
fn saved(loader: &Loader, dir: &Path) -> LoaderSpec {
    let path = dir.join("spec.json");
    loader.spec().unwrap().save(&path).unwrap();
    LoaderSpec::load(&path).unwrap()
}

fn causal_time_windows_replay_equals_training(device: &Device) {
    let dir = tempfile::tempdir().unwrap();
    let dataset = synthetic(dir.path());
    let loader = time_loader(device, &dataset, true);
    let live = Live::new(&saved(&loader, dir.path()), device, &LiveOptions::default()).unwrap();
    let mut compared = 0;
    for episode in 0..dataset.len() {
        live.reset().unwrap();
        let samples: Vec<usize> = (0..loader.windows()).collect();
        let batch = loader.batch(&samples).unwrap();
        let mut events = recording(&dataset, episode, &STREAMS).into_iter().peekable();
        for (b, (&e, &anchor)) in batch.episodes.iter().zip(&batch.anchors).enumerate() {
            if e != episode {
                continue;
            }
            // Everything up to the anchor has arrived; nothing after it.
            while let Some((time, name, row)) = events.next_if(|(time, ..)| *time <= anchor) {
                live.push(&name, time, row.as_slice()).unwrap();
            }
            let window = live.window(anchor).unwrap();
            for name in STREAMS {
                let (want, want_mask) = training_row(&batch, name, b, 3);
                let (got, got_mask) = live_row(&window, name);
                assert_eq!(got_mask, want_mask, "`{name}` mask, episode {episode}, anchor {anchor}");
                assert!(got == want, "`{name}` values, episode {episode}, anchor {anchor}");
            }
            compared += 1;
        }
    }
    assert_eq!(compared, loader.windows(), "every anchor of the epoch compared");
}

/// The two implementations of the causal rule agree: resident streams (the
/// assembly kernel, or its CPU reference) and streamed ones (rows read per
/// window, resampled by `Previous` with a leading zero row).
fn causal_resident_and_streamed_windows_agree(device: &Device) {
    let dir = tempfile::tempdir().unwrap();
    let dataset = synthetic(dir.path());
    let streams = &STREAMS[..4];
    let windows = WindowSpec::Times(TimeWindowSpec { hz: 30.0, history: 3, horizon: 3, causal: true });
    let batch = |mode| {
        let mut config = LoaderConfig::new(streams, windows.clone(), 8);
        config.mode = mode;
        let loader = Loader::new(device, dataset.clone(), config).unwrap();
        loader.batch(&(0..loader.windows()).collect::<Vec<_>>()).unwrap()
    };
    let (resident, streamed) = (batch(robocache::LoaderMode::Auto), batch(robocache::LoaderMode::Streaming));
    for name in streams {
        let (r, s) = (resident.stream(name).unwrap(), streamed.stream(name).unwrap());
        assert_eq!(r.mask.to_vec::<bool>().unwrap(), s.mask.to_vec::<bool>().unwrap(), "`{name}` masks");
        let as_f32 = |t: &robocache::Tensor| -> Vec<f32> {
            t.to_host().unwrap().as_slice().to_f64_vec().into_iter().map(|v| v as f32).collect()
        };
        assert_eq!(as_f32(&r.data), as_f32(&s.data), "`{name}` values");
        let mask = r.mask.to_vec::<bool>().unwrap();
        assert!(mask.contains(&true) && mask.contains(&false), "`{name}`: windows at the start are padding");
    }
}

fn non_causal_windows_replay_a_lag_behind(device: &Device) {
    let dir = tempfile::tempdir().unwrap();
    let dataset = synthetic(dir.path());
    let loader = time_loader(device, &dataset, false);
    let live = Live::new(&saved(&loader, dir.path()), device, &LiveOptions::default()).unwrap();
    // The slowest stream (actions and gripper, 20 Hz) sets the lag.
    let lag = 1.0 / 20.0 + 1e-9;
    let (mut compared, mut waited) = (0, 0);
    let samples: Vec<usize> = (0..loader.windows()).collect();
    let batch = loader.batch(&samples).unwrap();
    for episode in 0..dataset.len() {
        live.reset().unwrap();
        let mut events = recording(&dataset, episode, &STREAMS).into_iter().peekable();
        let last_of = |name: &str| dataset.times(episode, name).unwrap().span().unwrap().1;
        for (b, (&e, &anchor)) in batch.episodes.iter().zip(&batch.anchors).enumerate() {
            if e != episode {
                continue;
            }
            while let Some((time, name, row)) = events.next_if(|(time, ..)| *time <= anchor + lag) {
                live.push(&name, time, row.as_slice()).unwrap();
            }
            match live.window(anchor) {
                Ok(window) => {
                    for name in STREAMS {
                        let (want, want_mask) = training_row(&batch, name, b, 3);
                        assert_eq!(live_row(&window, name), (want, want_mask), "`{name}` at {anchor}");
                    }
                    compared += 1;
                }
                // Only where a stream has ended before the anchor: a live
                // robot's stream has a next sample.
                Err(Error::Live { stream, .. }) => {
                    assert!(last_of(&stream) < anchor, "`{stream}` at {anchor}");
                    waited += 1;
                }
                Err(other) => panic!("{other}"),
            }
        }
    }
    assert!(compared > 3 * waited && compared > 20, "{compared} compared, {waited} past a stream's end");
}

fn delta_windows_replay_equals_training_on_video(device: &Device) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../robocache-datasets/tests/fixtures/lerobot/av1");
    let dataset = Arc::new(Dataset::open(&root).unwrap());
    let (front, state, counter) = ("observation.images.front", "observation.state", "observation.counter");
    let streams = [front, state, counter];
    let deltas = DeltaTimestamps::new(vec![(front.into(), vec![-0.1, 0.0]), (state.into(), vec![-0.2, -0.1, 0.0])]);
    let mut config = LoaderConfig::new(&streams, WindowSpec::Deltas(deltas), 4);
    config.shuffle = false;
    config.frames = FrameOutput {
        layout: FrameLayout::Chw,
        dtype: FrameDType::F32,
        resize: Some(FrameResize {
            width: 20,
            height: 16,
            crop: Some(robocache::CropBox { left: 4, top: 2, width: 40, height: 28 }),
        }),
    };
    let loader = Loader::new(device, dataset.clone(), config).unwrap();
    let spec = loader.spec().unwrap();
    let options =
        LiveOptions { streams: Some(streams.iter().map(|s| (*s).to_owned()).collect()), ..Default::default() };
    let live = Live::new(&LoaderSpec::from_json(&spec.to_json().unwrap()).unwrap(), device, &options).unwrap();
    // The frames as the robot's camera gives them: 8-bit RGB.
    let plain = DeltaTimestamps::new(vec![(front.into(), vec![0.0]), (state.into(), vec![0.0])]);
    let mut rgb = LoaderConfig::new(&streams, WindowSpec::Deltas(plain), 4);
    rgb.shuffle = false;
    let rgb = Loader::new(device, dataset.clone(), rgb).unwrap();
    let samples: Vec<usize> = (0..loader.windows()).collect();
    let (batch, recorded) = (loader.batch(&samples).unwrap(), rgb.batch(&samples).unwrap());
    let frames = recorded.stream(front).unwrap().data.to_vec::<u8>().unwrap();
    let states = recorded.stream(state).unwrap().data.to_vec::<f32>().unwrap();
    let counters = recorded.stream(counter).unwrap().data.to_vec::<i64>().unwrap();
    let frame_bytes = 32 * 48 * 3;
    for (b, (&episode, &anchor)) in batch.episodes.iter().zip(&batch.anchors).enumerate() {
        if b == 0 || batch.episodes[b - 1] != episode {
            live.reset().unwrap();
        }
        live.push(front, anchor, HostSlice::U8(&frames[b * frame_bytes..][..frame_bytes])).unwrap();
        live.push(state, anchor, HostSlice::F32(&states[b * 6..][..6])).unwrap();
        live.push(counter, anchor, HostSlice::I64(&counters[b..][..1])).unwrap();
        let window = live.window(anchor).unwrap();
        for (name, steps) in [(front, 2), (state, 3), (counter, 1)] {
            assert_eq!(live_row(&window, name), training_row(&batch, name, b, steps), "`{name}`, sample {b}");
        }
    }
}

/// A ROS 2 bag opened with a mapping (the arm MCAP: joint states at their
/// header stamps, an IMU quaternion, a gripper, commands), replayed as a
/// robot's subscriptions deliver its messages' values.
fn causal_bag_windows_replay_equals_training(device: &Device) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../robocache-datasets/tests/fixtures/ros2/arm_mcap");
    let mapping = "[streams.\"observation.state\"]\ntopic = \"/joint_states\"\nfield = \"position\"\n\
                   joints = [\"j1\", \"j2\", \"j3\"]\n\
                   [streams.orientation]\ntopic = \"/imu\"\nfield = \"orientation\"\n\
                   [streams.gripper]\ntopic = \"/gripper\"\nfield = \"data\"\n";
    let options =
        robocache::datasets::OpenOptions { bag_mapping: Some(mapping.parse().unwrap()), ..Default::default() };
    let dataset = Arc::new(Dataset::open_with(&root, &options).unwrap());
    let streams = ["observation.state", "orientation", "gripper"];
    let windows = WindowSpec::Times(TimeWindowSpec { hz: 15.0, history: 3, horizon: 2, causal: true });
    let mut config = LoaderConfig::new(&streams, windows, 8);
    config.shuffle = false;
    let loader = Loader::new(device, dataset.clone(), config).unwrap();
    let spec = loader.spec().unwrap();
    let topics = spec.bag_mapping.as_ref().map(|m| m["streams"]["observation.state"]["topic"].clone());
    assert_eq!(topics, Some("/joint_states".into()), "the spec carries the bag mapping");
    let live = Live::new(&spec, device, &LiveOptions::default()).unwrap();
    let batch = loader.batch(&(0..loader.windows()).collect::<Vec<_>>()).unwrap();
    let mut events = recording(&dataset, 0, &streams).into_iter().peekable();
    let mut valid_steps = 0;
    for (b, &anchor) in batch.anchors.iter().enumerate() {
        while let Some((time, name, row)) = events.next_if(|(time, ..)| *time <= anchor) {
            live.push(&name, time, row.as_slice()).unwrap();
        }
        let window = live.window(anchor).unwrap();
        for name in streams {
            let (want, want_mask) = training_row(&batch, name, b, 4);
            valid_steps += want_mask.iter().filter(|&&v| v).count();
            assert_eq!(live_row(&window, name), (want, want_mask), "`{name}` at {anchor}");
        }
    }
    assert!(batch.anchors.len() > 5 && valid_steps > batch.anchors.len(), "{valid_steps} valid steps");
}

/// The same bag replayed as serialized messages, as a robot's subscribers
/// receive them (log-time order), through `push_message`: decoded by the
/// bag reader's decoder, plans, time rule and joint holding.
fn bag_messages_pushed_serialized_replay_training(device: &Device) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../robocache-datasets/tests/fixtures/ros2/arm_mcap");
    let mapping = "[streams.\"observation.state\"]\ntopic = \"/joint_states\"\nfield = \"position\"\n\
                   joints = [\"j3\", \"j1\"]\n\
                   [streams.orientation]\ntopic = \"/imu\"\nfield = \"orientation\"\n\
                   [streams.gripper]\ntopic = \"/gripper\"\nfield = \"data\"\n\
                   [streams.action]\ntopic = \"/cmd\"\nfield = \"data\"\ndtype = \"float64\"\n";
    let options =
        robocache::datasets::OpenOptions { bag_mapping: Some(mapping.parse().unwrap()), ..Default::default() };
    let dataset = Arc::new(Dataset::open_with(&root, &options).unwrap());
    let streams = ["observation.state", "orientation", "gripper", "action"];
    let windows = WindowSpec::Times(TimeWindowSpec { hz: 15.0, history: 3, horizon: 2, causal: true });
    let mut config = LoaderConfig::new(&streams, windows, 8);
    config.shuffle = false;
    let loader = Loader::new(device, dataset.clone(), config).unwrap();
    let spec = LoaderSpec::from_json(&loader.spec().unwrap().to_json().unwrap()).unwrap();
    assert_eq!(spec.bag_topics.len(), 4, "{:?}", spec.bag_topics);
    let origin = dataset.info().episodes[0].metadata["origin_ns"].as_u64().unwrap();
    let options = LiveOptions { streams: None, message_origin_ns: origin };
    let live = Live::new(&spec, device, &options).unwrap();
    let batch = loader.batch(&(0..loader.windows()).collect::<Vec<_>>()).unwrap();
    let bytes = std::fs::read(root.join("arm_mcap.mcap")).unwrap();
    let mut messages: Vec<_> = mcap::MessageStream::new(&bytes)
        .unwrap()
        .map(Result::unwrap)
        .filter(|m| ["/joint_states", "/imu", "/gripper", "/cmd"].contains(&m.channel.topic.as_str()))
        .collect();
    messages.sort_by_key(|m| m.log_time);
    let mut messages = messages.into_iter().peekable();
    // Subscribers receive messages some latency after their stamps: every
    // message logged up to half a second after the anchor has arrived.
    let arrived = |anchor: f64| origin + ((anchor + 0.5) * 1e9) as u64;
    let mut valid = 0;
    for (b, &anchor) in batch.anchors.iter().enumerate() {
        while let Some(message) = messages.next_if(|m| m.log_time <= arrived(anchor)) {
            live.push_message(&message.channel.topic, message.log_time, Some(message.publish_time), &message.data)
                .unwrap();
        }
        let window = live.window(anchor).unwrap();
        for name in streams {
            let (want, want_mask) = training_row(&batch, name, b, 4);
            valid += want_mask.iter().filter(|&&v| v).count();
            assert_eq!(live_row(&window, name), (want, want_mask), "`{name}` at {anchor}");
        }
    }
    assert!(valid > batch.anchors.len() * 4, "{valid} valid steps");
    let message = live.push_message("/tf", 0, None, &[0; 8]).unwrap_err().to_string();
    assert!(message.contains("`/tf`") && message.contains("no numeric stream"), "{message}");
}

fn bad_input_is_refused_naming_the_stream(device: &Device) {
    let dir = tempfile::tempdir().unwrap();
    let dataset = synthetic(dir.path());
    let causal =
        Live::new(&time_loader(device, &dataset, true).spec().unwrap(), device, &LiveOptions::default()).unwrap();
    let refused = |result: Result<(), Error>, stream: &str, words: &str| {
        let message = result.unwrap_err().to_string();
        assert!(message.contains(&format!("`{stream}`")) && message.contains(words), "{message}");
    };
    let joints = [0.0f32; 7];
    refused(causal.push("obs/elbow", 0.0, HostSlice::F32(&joints)), "obs/elbow", "not a stream");
    refused(causal.push("obs/joint_pos", 0.0, HostSlice::F32(&joints[..6])), "obs/joint_pos", "not 6 values");
    refused(causal.push("obs/joint_pos", 0.0, HostSlice::I32(&[0; 7])), "obs/joint_pos", "not i32");
    refused(causal.push("obs/joint_pos", 0.0, HostSlice::F64(&[0.0; 7])), "obs/joint_pos", "not f64");
    refused(causal.push("obs/joint_pos", f64::NAN, HostSlice::F32(&joints)), "obs/joint_pos", "not finite");
    causal.push("obs/joint_pos", 1.0, HostSlice::F32(&joints)).unwrap();
    refused(causal.push("obs/joint_pos", 0.5, HostSlice::F32(&joints)), "obs/joint_pos", "does not come after");
    refused(causal.push("obs/joint_pos", 1.0, HostSlice::F32(&joints)), "obs/joint_pos", "does not come after");
    let frame = vec![0u8; 12 * 15 * 3];
    refused(causal.push("obs/agentview_image", 1.0, HostSlice::U8(&frame)), "obs/agentview_image", "[12, 16, 3]");
    refused(causal.push_encoded("obs/agentview_image", 1.0, b"nope"), "obs/agentview_image", "neither PNG nor JPEG");
    // Causal: before any sample of a stream, its steps are padding (zeros).
    let window = causal.window(1.0).unwrap();
    let actions = window.stream("actions").unwrap();
    assert_eq!(actions.mask.to_vec::<bool>().unwrap(), [true; 3], "pad masks: all padding");
    assert!(actions.data.to_vec::<f32>().unwrap().iter().all(|&v| v == 0.0));
    assert_eq!(window.stream("obs/agentview_image").unwrap().data.shape(), [1, 3, 3, 6, 8]);
    // Non-causal: an error naming the stream that has not caught up.
    let later =
        Live::new(&time_loader(device, &dataset, false).spec().unwrap(), device, &LiveOptions::default()).unwrap();
    later.push("obs/joint_pos", 1.0, HostSlice::F32(&joints)).unwrap();
    let message = later.window(1.0).unwrap_err().to_string();
    assert!(message.contains("`actions`") && message.contains("no sample at or after 1 s"), "{message}");
}

#[test]
fn specs_round_trip_and_refuse_what_they_cannot_reproduce() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = synthetic(dir.path());
    let loader = time_loader(&Device::Cpu, &dataset, true);
    let spec = loader.spec().unwrap();
    assert_eq!(saved(&loader, dir.path()), spec);
    let text = spec.to_json().unwrap();
    assert!(!text.contains(dir.path().to_str().unwrap()), "no path to the dataset in a spec");
    let newer = text.replacen("\"version\": 1", "\"version\": 2", 1);
    let message = LoaderSpec::from_json(&newer).unwrap_err().to_string();
    assert!(message.contains("version 2") && message.contains("newer robocache"), "{message}");
    let mut blind = spec.clone();
    blind.normalization.as_mut().unwrap().streams.remove("obs/joint_pos");
    let message = LoaderSpec::from_json(&blind.to_json().unwrap()).unwrap_err().to_string();
    assert!(message.contains("no statistics of `obs/joint_pos`"), "{message}");
    assert!(LoaderSpec::from_json("{\"format\": \"other\"}").unwrap_err().to_string().contains("not a robocache"));
    // Step windows count rows, which live samples lack.
    let steps = WindowSpec::Steps(robocache::datasets::StepWindowSpec { seq_length: 4, ..Default::default() });
    let loader = Loader::new(&Device::Cpu, dataset, LoaderConfig::new(&["actions"], steps, 4)).unwrap();
    assert!(loader.spec().unwrap_err().to_string().contains("step windows"));
}

macro_rules! live_tests {
    ($backend:ident, $device:expr) => {
        mod $backend {
            fn device() -> Option<robocache::Device> {
                match $device {
                    Ok(device) => Some(device),
                    Err(reason) => {
                        // The GPU bundle sets ROBOCACHE_REQUIRE_CUDA=1: there
                        // a missing device is a failure, not a skip.
                        if stringify!($backend) == "cuda"
                            && std::env::var("ROBOCACHE_REQUIRE_CUDA").is_ok_and(|v| v == "1")
                        {
                            panic!("ROBOCACHE_REQUIRE_CUDA=1 but the cuda backend is not available: {reason}");
                        }
                        #[allow(clippy::print_stderr, reason = "a skipped backend says why")]
                        {
                            eprintln!("skipping the {} backend: {reason}", stringify!($backend));
                        }
                        None
                    }
                }
            }

            #[test]
            fn causal_time_windows_replay_equals_training() {
                device().map(|d| super::causal_time_windows_replay_equals_training(&d));
            }

            #[test]
            fn non_causal_windows_replay_a_lag_behind() {
                device().map(|d| super::non_causal_windows_replay_a_lag_behind(&d));
            }

            #[test]
            fn causal_resident_and_streamed_windows_agree() {
                device().map(|d| super::causal_resident_and_streamed_windows_agree(&d));
            }

            #[test]
            fn delta_windows_replay_equals_training_on_video() {
                device().map(|d| super::delta_windows_replay_equals_training_on_video(&d));
            }

            #[test]
            fn causal_bag_windows_replay_equals_training() {
                device().map(|d| super::causal_bag_windows_replay_equals_training(&d));
            }

            #[test]
            fn bag_messages_pushed_serialized_replay_training() {
                device().map(|d| super::bag_messages_pushed_serialized_replay_training(&d));
            }

            #[test]
            fn bad_input_is_refused_naming_the_stream() {
                device().map(|d| super::bad_input_is_refused_naming_the_stream(&d));
            }
        }
    };
}

live_tests!(cpu, Ok::<_, robocache::Error>(robocache::Device::cpu()));
live_tests!(cuda, robocache::Device::cuda(0));
