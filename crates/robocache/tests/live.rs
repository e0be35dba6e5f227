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
    synthetic_at(dir, 1.0)
}

/// The synthetic recording with every stream `rate` times as fast (control
/// at 20 Hz, joints at 100 Hz, the camera at 30 Hz, times `rate`), episodes
/// as long.
fn synthetic_at(dir: &Path, rate: f64) -> Arc<Dataset> {
    let path = dir.join(format!("live_{rate}x.hdf5"));
    let spec = SyntheticSpec {
        episodes: 2,
        mean_steps: (24.0 * rate) as usize,
        control_hz: 20.0 * rate,
        joint_hz: 100.0 * rate,
        camera_hz: 30.0 * rate,
        image: Some([12, 16]),
        seed: 5,
    };
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
    let statistics = Normalization::compute(dataset, &STREAMS[..4], NormalizationMode::ZScore).unwrap();
    time_loader_normalized(device, dataset, causal, statistics)
}

fn time_loader_normalized(device: &Device, dataset: &Arc<Dataset>, causal: bool, statistics: Normalization) -> Loader {
    Loader::new(device, dataset.clone(), time_config(causal, statistics)).unwrap()
}

/// Time windows of 30 Hz (2 back, 4 ahead) of every stream, pad masks, in
/// order, normalized by `statistics`, frames resized to 8x6 float32 CHW.
fn time_config(causal: bool, statistics: Normalization) -> LoaderConfig {
    let windows = WindowSpec::Times(TimeWindowSpec { hz: 30.0, history: 2, horizon: 4, causal });
    let mut config = LoaderConfig::new(&STREAMS, windows, 8);
    config.masks = MaskKind::Pad;
    config.shuffle = false;
    config.normalization = Some(statistics);
    config.frames =
        FrameOutput { layout: FrameLayout::Chw, dtype: FrameDType::F32, resize: Some(FrameResize::to(8, 6)) };
    config
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
    replay_equals_training(&live, &loader, &dataset);
}

/// A loader trained with augmentation: its spec carries the evaluation
/// transform (the centre crop, resized), and live windows equal the
/// loader's windows in evaluation mode bit for bit.
fn augmented_loader_evaluation_windows_replay_in_live(device: &Device) {
    use robocache::augment::{lerobot_default, Augment, AugmentConfig, Crop, CropOutput, CropSpec};

    let dir = tempfile::tempdir().unwrap();
    let dataset = synthetic(dir.path());
    let statistics = Normalization::compute(&dataset, &STREAMS[..4], NormalizationMode::ZScore).unwrap();
    let mut config = time_config(true, statistics);
    let crop = CropSpec {
        crop: Crop::Fraction(0.8),
        output: CropOutput::Size { width: 10, height: 9 },
        centre_in_evaluation: true,
    };
    config.augment = Some(AugmentConfig::uniform(Augment { crop: Some(crop), ..lerobot_default() }));
    let loader = Loader::new(device, dataset.clone(), config).unwrap();
    let spec = saved(&loader, dir.path());
    assert_eq!(spec.evaluation_crops.len(), 1);
    assert_eq!((spec.evaluation_crops[0].crop, spec.evaluation_crops[0].output), ((1, 1, 6, 4), (10, 9)));
    let live = Live::new(&spec, device, &LiveOptions::default()).unwrap();
    let training = loader.batch(&[0]).unwrap();
    loader.set_evaluation(true);
    let evaluation = loader.batch(&[0]).unwrap();
    let camera = "obs/agentview_image";
    assert_eq!(evaluation.stream(camera).unwrap().data.shape(), [1, 6, 3, 9, 10]);
    assert_ne!(training_row(&training, camera, 0, 6).0, training_row(&evaluation, camera, 0, 6).0);
    replay_equals_training(&live, &loader, &dataset);
}

/// A robot whose sensors publish 10 and 100 times as fast as the recording
/// the policy was trained on: the live windows of the training spec equal
/// the windows the same loader (the training statistics) gives of a
/// recording at that rate, at every anchor. The rings keep samples by time,
/// so they hold the window's span whatever the rate.
fn windows_at_faster_rates_equal_training(device: &Device) {
    let dir = tempfile::tempdir().unwrap();
    let trained = time_loader(device, &synthetic(dir.path()), true);
    let spec = saved(&trained, dir.path());
    let statistics = spec.normalization.clone().unwrap();
    for rate in [10.0, 100.0] {
        let faster = synthetic_at(dir.path(), rate);
        let loader = time_loader_normalized(device, &faster, true, statistics.clone());
        let live = Live::new(&spec, device, &LiveOptions::default()).unwrap();
        replay_equals_training(&live, &loader, &faster);
    }
}

/// Every episode of `dataset` pushed sample by sample into `live`; at each
/// anchor of `loader`'s epoch, the live window equals the batch's row.
fn replay_equals_training(live: &Live, loader: &Loader, dataset: &Dataset) {
    let mut compared = 0;
    let samples: Vec<usize> = (0..loader.windows()).collect();
    let batch = loader.batch(&samples).unwrap();
    for episode in 0..dataset.len() {
        live.reset(None).unwrap();
        let mut events = recording(dataset, episode, &STREAMS).into_iter().peekable();
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
        live.reset(None).unwrap();
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
            live.reset(None).unwrap();
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
    let options = LiveOptions { message_origin_ns: origin, ..Default::default() };
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

/// A window needing a sample the ring no longer holds is an error naming
/// the stream and the times: never the episode's first sample held across
/// the gap, never a window of padding.
fn a_window_the_ring_no_longer_holds_is_an_error(device: &Device) {
    let dir = tempfile::tempdir().unwrap();
    let dataset = synthetic(dir.path());
    let spec = time_loader(device, &dataset, true).spec().unwrap();
    let joints = |t: f64| -> Vec<f32> { (0..7).map(|c| (t * 0.37 + f64::from(c)).sin() as f32).collect() };
    let only_joints = |lookback_s: f64, ring_bytes: usize| {
        let options =
            LiveOptions { streams: Some(vec!["obs/joint_pos".into()]), lookback_s, ring_bytes, ..Default::default() };
        Live::new(&spec, device, &options).unwrap()
    };
    let is_kept_error = |result: Result<LiveWindow, Error>, words: &str| {
        let message = result.unwrap_err().to_string();
        assert!(message.contains("`obs/joint_pos`") && message.contains(words), "{message}");
    };

    // 1,000 s at 100 Hz: windows at the end are exact (those of a Live
    // given only the last two seconds), in the middle an error.
    let live = only_joints(1.0, robocache::live::DEFAULT_RING_BYTES);
    let recent = only_joints(1.0, robocache::live::DEFAULT_RING_BYTES);
    for i in 0..=100_000 {
        let t = f64::from(i) / 100.0;
        live.push("obs/joint_pos", t, HostSlice::F32(&joints(t))).unwrap();
        if t >= 998.0 {
            recent.push("obs/joint_pos", t, HostSlice::F32(&joints(t))).unwrap();
        }
    }
    for at in [1000.0, 999.5, 999.004] {
        let (got, want) = (live.window(at).unwrap(), recent.window(at).unwrap());
        assert_eq!(live_row(&got, "obs/joint_pos"), live_row(&want, "obs/joint_pos"), "window at {at}");
        assert_eq!(live_row(&got, "obs/joint_pos").1, [false; 3], "window at {at}: all valid");
    }
    is_kept_error(live.window(500.0), "no longer kept");
    is_kept_error(live.window(998.5), "no longer kept");

    // A window whose first target lies before the episode and whose second
    // lies between its first sample and the oldest kept one.
    let live = only_joints(0.0, robocache::live::DEFAULT_RING_BYTES);
    for i in 0..=20 {
        let t = f64::from(i) / 100.0;
        live.push("obs/joint_pos", t, HostSlice::F32(&joints(t))).unwrap();
    }
    is_kept_error(live.window(0.05), "no longer kept");
    // Before the episode's first sample: padding, as in training.
    assert_eq!(live_row(&live.window(-1.0).unwrap(), "obs/joint_pos").1, [true; 3]);

    // The byte bound: a ring of 2 KB at 1 kHz holds about 25 samples, the
    // window spans 67 ms: an error naming the bound.
    let live = only_joints(1.0, 2048);
    for i in 0..=1000 {
        let t = f64::from(i) / 1000.0;
        live.push("obs/joint_pos", t, HostSlice::F32(&joints(t))).unwrap();
    }
    is_kept_error(live.window(1.0), "ring_bytes");
}

/// Serialized messages follow the bag reader's tie rule (a sample at or
/// before its stream's latest moves just after it: three messages with one
/// stamp are all kept), `reset` takes the next episode's origin, and a
/// message that does not fit changes nothing.
fn messages_with_one_stamp_are_kept_as_the_bag_reader_keeps_them(device: &Device) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../robocache-datasets/tests/fixtures/ros2/arm_mcap");
    let mapping = "[streams.\"observation.state\"]\ntopic = \"/joint_states\"\nfield = \"position\"\n\
                   joints = [\"j1\", \"j2\", \"j3\"]\n";
    let options =
        robocache::datasets::OpenOptions { bag_mapping: Some(mapping.parse().unwrap()), ..Default::default() };
    let dataset = Arc::new(Dataset::open_with(&root, &options).unwrap());
    let windows = WindowSpec::Times(TimeWindowSpec { hz: 15.0, history: 3, horizon: 2, causal: true });
    let loader = Loader::new(device, dataset.clone(), LoaderConfig::new(&["observation.state"], windows, 8)).unwrap();
    let live = Live::new(&loader.spec().unwrap(), device, &LiveOptions::default()).unwrap();
    let bytes = std::fs::read(root.join("arm_mcap.mcap")).unwrap();
    let message = mcap::MessageStream::new(&bytes)
        .unwrap()
        .map(Result::unwrap)
        .find(|m| m.channel.topic == "/joint_states")
        .unwrap();
    let origin = dataset.info().episodes[0].metadata["origin_ns"].as_u64().unwrap();
    for episode in 0..2 {
        live.reset(Some(origin)).unwrap();
        for _ in 0..3 {
            live.push_message("/joint_states", message.log_time, None, &message.data).unwrap();
        }
        // The stamp's time, and twice just after it: the third sample of
        // the window's last step is held from the same message.
        let stamp = dataset.times(0, "observation.state").unwrap().time(0);
        let window = live.window(stamp + 1e-6).unwrap();
        assert_eq!(live_row(&window, "observation.state").1.last(), Some(&true), "episode {episode}");
        let cut = &message.data[..message.data.len() / 2];
        assert!(live.push_message("/joint_states", message.log_time + 1, None, cut).is_err());
        let after = live.window(stamp + 1e-6).unwrap();
        assert_eq!(live_row(&after, "observation.state"), live_row(&window, "observation.state"));
    }
}

/// A member of a mixture deploys with the spec the mixture trained it
/// with: the mixture's names, widths (zeros and `dim_is_pad` past the
/// member's), a concatenation, a constant, a camera the member lacks; its
/// live windows equal the member's rows of the mixture's batches.
fn a_mixture_member_replays_its_rows_of_the_mixture(device: &Device) {
    use robocache::datasets::{EpochLength, MixtureWeights, Shard};
    use robocache::loader::mixture::{MemberKey, MixtureConfig, MixtureLoader, MixtureMember};
    let dir = tempfile::tempdir().unwrap();
    let with_camera = synthetic(dir.path());
    let path = dir.path().join("other.hdf5");
    let spec = SyntheticSpec { episodes: 2, mean_steps: 30, image: None, seed: 9, ..Default::default() };
    write_robomimic(&path, &spec).unwrap();
    let without = Arc::new(Dataset::open(&path).unwrap());
    let own = |dataset: &Arc<Dataset>, streams: &[&str]| {
        let statistics = Normalization::compute(dataset, &streams[..3], NormalizationMode::ZScore).unwrap();
        let windows = WindowSpec::Times(TimeWindowSpec { hz: 30.0, history: 2, horizon: 4, causal: true });
        let mut config = LoaderConfig::new(streams, windows, 8);
        config.masks = MaskKind::Pad;
        config.normalization = Some(statistics);
        config.frames =
            FrameOutput { layout: FrameLayout::Chw, dtype: FrameDType::F32, resize: Some(FrameResize::to(8, 6)) };
        Arc::new(Loader::new(device, dataset.clone(), config).unwrap())
    };
    let key = |name: &str, key: MemberKey| (name.to_owned(), key);
    let members = vec![
        MixtureMember {
            name: "arm".into(),
            loader: own(
                &with_camera,
                &["obs/joint_pos", "obs/gripper_closed", "obs/robot0_eef_quat", "obs/agentview_image"],
            ),
            weight: 1.0,
            keys: vec![
                key("state", MemberKey::Concat(vec!["obs/joint_pos".into(), "obs/gripper_closed".into()])),
                key("quat", MemberKey::Stream("obs/robot0_eef_quat".into())),
                key("camera", MemberKey::Stream("obs/agentview_image".into())),
            ],
        },
        MixtureMember {
            name: "other".into(),
            loader: own(&without, &["obs/joint_pos", "actions", "obs/gripper_closed"]),
            weight: 1.0,
            keys: vec![
                key("state", MemberKey::Stream("obs/joint_pos".into())),
                key("quat", MemberKey::Constant(vec![0.0, 0.0, 0.0, 1.0])),
            ],
        },
    ];
    let config = MixtureConfig {
        streams: vec!["state".into(), "quat".into(), "camera".into()],
        batch_size: 16,
        weights: MixtureWeights::Sample,
        epoch: EpochLength::Windows(64),
        seed: 3,
        shard: Shard::default(),
        drop_last: false,
        workers: 1,
        prefetch: 2,
        batches_together: Some(1),
    };
    let mixture = MixtureLoader::new(device, members, config).unwrap();
    let batches: Vec<_> = (0..mixture.batches_per_epoch()).map(|i| mixture.batch_of_epoch(0, i).unwrap()).collect();
    let datasets = [&with_camera, &without];
    let member_streams: [&[&str]; 2] =
        [&["obs/joint_pos", "obs/gripper_closed", "obs/robot0_eef_quat", "obs/agentview_image"], &["obs/joint_pos"]];
    for (m, dataset) in datasets.iter().enumerate() {
        let spec = LoaderSpec::from_json(&mixture.spec(m, None).unwrap().to_json().unwrap()).unwrap();
        let live = Live::new(&spec, device, &LiveOptions::default()).unwrap();
        assert_eq!(live.window_names(), ["state", "quat", "camera"]);
        let loader = &mixture.members()[m].loader;
        let all = loader.batch(&(0..loader.windows()).collect::<Vec<_>>()).unwrap();
        // (episode, anchor, batch, row) of each of the member's rows.
        let mut rows = Vec::new();
        for (b, batch) in batches.iter().enumerate() {
            for (r, (&d, &w)) in batch.datasets.iter().zip(&batch.windows).enumerate() {
                if d == m {
                    rows.push((all.episodes[w], all.anchors[w], b, r));
                }
            }
        }
        rows.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        assert!(rows.len() > 8, "member {m}: {} rows", rows.len());
        let mut episode = usize::MAX;
        let mut events = Vec::new().into_iter().peekable();
        for (e, anchor, b, r) in rows {
            if e != episode {
                episode = e;
                live.reset(None).unwrap();
                events = recording(dataset, e, member_streams[m]).into_iter().peekable();
            }
            while let Some((time, name, row)) = events.next_if(|(time, ..)| *time <= anchor) {
                live.push(&name, time, row.as_slice()).unwrap();
            }
            let window = live.window(anchor).unwrap();
            for (s, name) in ["state", "quat", "camera"].iter().enumerate() {
                let stream = batches[b].stream(name).unwrap();
                let shape = stream.data.shape();
                let per_step = shape[2..].iter().product::<usize>() * stream.data.dtype().size_in_bytes();
                let data = stream.data.to_host().unwrap();
                let want = &data.as_slice().as_bytes()[r * shape[1] * per_step..][..3 * per_step];
                let mask = stream.mask.to_vec::<bool>().unwrap();
                let dims = stream.dim_is_pad.to_vec::<bool>().unwrap();
                let width = stream.dim_is_pad.shape()[1];
                let (got, got_mask) = live_row(&window, name);
                let what = format!("member {m} `{name}` at {anchor} (episode {e})");
                assert_eq!(got_mask, mask[r * shape[1]..][..3], "{what} mask");
                assert!(got == want, "{what} values");
                assert_eq!(window.dim_is_pad[s].to_vec::<bool>().unwrap(), dims[r * width..][..width], "{what} dims");
            }
        }
    }
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

/// A spec is a contract: what a reader cannot rely on is refused at load,
/// naming the field, and every spec a loader saves loads.
#[test]
fn a_spec_is_refused_at_load_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = synthetic(dir.path());
    let text = time_loader(&Device::Cpu, &dataset, true).spec().unwrap().to_json().unwrap();
    let spec: serde_json::Value = serde_json::from_str(&text).unwrap();
    let refused = |edit: &dyn Fn(&mut serde_json::Value), words: &[&str]| {
        let mut edited = spec.clone();
        edit(&mut edited);
        let message = LoaderSpec::from_json(&edited.to_string()).unwrap_err().to_string();
        assert!(words.iter().all(|w| message.contains(w)), "{words:?} not in: {message}");
    };
    refused(&|s| s["surprise"] = 1.into(), &["unknown field `surprise`"]);
    refused(&|s| s["streams"][1]["colour"] = "red".into(), &["unknown field `colour`"]);
    refused(&|s| s["frames"]["scale"] = 2.into(), &["unknown field `scale`"]);
    refused(&|s| s["clock"]["jitter"] = 0.into(), &["unknown field `jitter`"]);
    refused(&|s| s["normalization"]["streams"]["actions"]["median"] = serde_json::json!([0.0]), &["`median`"]);
    refused(&|s| drop(s.as_object_mut().unwrap().remove("normalization")), &["missing field `normalization`"]);
    refused(&|s| drop(s["streams"][0].as_object_mut().unwrap().remove("camera")), &["missing field `camera`"]);
    refused(
        &|s| s["normalization"]["streams"]["obs/joint_pos"]["mean"].as_array_mut().unwrap().truncate(3),
        &["normalization.streams[`obs/joint_pos`]", "`std` has 7 values, `mean` 3"],
    );
    refused(
        &|s| {
            for field in ["mean", "std", "min", "max", "p01", "p99", "counts"] {
                s["normalization"]["streams"]["obs/joint_pos"][field].as_array_mut().unwrap().truncate(3);
            }
        },
        &["`obs/joint_pos`", "3 channels of statistics, the stream has 7"],
    );
    refused(&|s| s["normalization"]["streams"]["actions"]["std"][0] = serde_json::Value::Null, &["normalization"]);
    refused(&|s| s["clock"]["hz"] = 1e300.into(), &["clock.hz", "1e300"]);
    refused(&|s| s["clock"]["hz"] = 0.into(), &["clock.hz"]);
    refused(&|s| s["clock"]["hz"] = (-30).into(), &["clock.hz"]);
    refused(&|s| s["clock"]["history"] = u64::MAX.into(), &["clock", "more than 10000 steps"]);
    refused(&|s| s["streams"][1]["step_shape"] = serde_json::json!([1 << 20, 1 << 20]), &["step_shape"]);
    refused(&|s| s["frames"]["size"] = serde_json::json!([8192, 8192]), &["would pass 1073741824 bytes"]);
    refused(&|s| s["streams"][4]["camera"] = serde_json::json!([100_000, 12]), &["camera", "each side"]);
    refused(&|s| s["streams"][1]["rate_hz"] = 1e300.into(), &["rate_hz"]);
    refused(&|s| s["streams"][2]["name"] = "actions".into(), &["another stream has this name"]);
    refused(&|s| s["frames"]["crop"] = serde_json::json!([10, 0, 10, 10]), &["frames.crop", "not inside"]);
    refused(&|s| s["version"] = 0.into(), &["version"]);
    refused(
        &|s| {
            s["clock"] = serde_json::json!({"kind": "deltas", "fps": 30.0, "tolerance_s": 0.0,
                                            "offsets": [["actions", [-1e6]]]})
        },
        &["clock.offsets[0] (`actions`)"],
    );
    // A spec of an older build (its rate called `max_rate_hz`) loads.
    let older = text.replace("\"rate_hz\"", "\"max_rate_hz\"");
    assert_eq!(LoaderSpec::from_json(&older).unwrap(), LoaderSpec::from_json(&text).unwrap());
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
            fn windows_at_faster_rates_equal_training() {
                device().map(|d| super::windows_at_faster_rates_equal_training(&d));
            }

            #[test]
            fn a_window_the_ring_no_longer_holds_is_an_error() {
                device().map(|d| super::a_window_the_ring_no_longer_holds_is_an_error(&d));
            }

            #[test]
            fn messages_with_one_stamp_are_kept_as_the_bag_reader_keeps_them() {
                device().map(|d| super::messages_with_one_stamp_are_kept_as_the_bag_reader_keeps_them(&d));
            }

            #[test]
            fn a_mixture_member_replays_its_rows_of_the_mixture() {
                device().map(|d| super::a_mixture_member_replays_its_rows_of_the_mixture(&d));
            }

            #[test]
            fn augmented_loader_evaluation_windows_replay_in_live() {
                device().map(|d| super::augmented_loader_evaluation_windows_replay_in_live(&d));
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
