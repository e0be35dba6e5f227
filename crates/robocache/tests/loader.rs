//! The loader on the CPU: every window exactly once per epoch across ranks
//! and devices, normalization statistics, bad configurations.

use std::collections::HashSet;
use std::sync::Arc;

use robocache::datasets::synthetic::{write_robomimic, SyntheticSpec};
use robocache::datasets::{Dataset, DeltaTimestamps, Shard, ShardBy, StepWindowSpec, TimeWindowSpec};
use robocache::{
    CropBox, Device, FrameDType, FrameLayout, FrameOutput, FrameResize, Loader, LoaderConfig, LoaderMode,
    Normalization, NormalizationMode, WindowSpec,
};

fn dataset(dir: &tempfile::TempDir) -> Arc<Dataset> {
    let path = dir.path().join("loader.hdf5");
    write_robomimic(
        &path,
        &SyntheticSpec { episodes: 7, mean_steps: 30, image: Some([4, 4]), seed: 5, ..Default::default() },
    )
    .unwrap();
    Arc::new(Dataset::open(&path).unwrap())
}

#[test]
fn every_window_once_per_epoch_across_ranks_and_devices() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = dataset(&dir);
    let windows = WindowSpec::Times(TimeWindowSpec { hz: 30.0, history: 1, horizon: 8, causal: false });
    let streams = ["actions", "obs/agentview_image"];
    let world = 3;
    let mut seen = Vec::new();
    let mut total = 0;
    for rank in 0..world {
        let config = LoaderConfig {
            shard: Shard::new(rank, world).unwrap(),
            seed: 9,
            ..LoaderConfig::new(&streams, windows.clone(), 10)
        };
        // Two "devices" in this process (both the CPU), as Loader::per_device splits them.
        for loader in Loader::per_device(&[Device::Cpu, Device::Cpu], dataset.clone(), config).unwrap() {
            total = loader.windows();
            for batch in loader.epoch(4) {
                let batch = batch.unwrap();
                assert_eq!(batch.stream("obs/agentview_image").unwrap().data.shape()[1..], [9, 4, 4, 3]);
                seen.extend(batch.samples);
            }
        }
    }
    assert_eq!(seen.len(), total, "every window once");
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), total);
}

#[test]
fn without_shuffle_an_epoch_is_in_order_and_the_same_every_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = dataset(&dir);
    let windows = WindowSpec::Times(TimeWindowSpec { hz: 30.0, history: 1, horizon: 8, causal: false });
    let in_order = |rank, world| {
        let config = LoaderConfig {
            shuffle: false,
            shard: Shard::new(rank, world).unwrap(),
            ..LoaderConfig::new(&["actions"], windows.clone(), 7)
        };
        let loader = Loader::new(&Device::Cpu, dataset.clone(), config).unwrap();
        let epoch = |e| loader.epoch(e).flat_map(|b| b.unwrap().samples).collect::<Vec<_>>();
        let first = epoch(0);
        assert_eq!(first, epoch(3), "the same order every epoch");
        (first, loader.windows())
    };
    let (all, total) = in_order(0, 1);
    assert_eq!(all, (0..total).collect::<Vec<_>>());
    let (rank_1, _) = in_order(1, 2);
    assert_eq!(rank_1, (1..total).step_by(2).collect::<Vec<_>>(), "sharded as the shuffled order is");
    let shuffled =
        Loader::new(&Device::Cpu, dataset.clone(), LoaderConfig::new(&["actions"], windows.clone(), 7)).unwrap();
    assert_ne!(shuffled.epoch(0).flat_map(|b| b.unwrap().samples).collect::<Vec<_>>(), all);
}

#[test]
fn sharded_by_episode_each_rank_reads_its_own_episodes_and_all_step_together() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = dataset(&dir);
    let windows = WindowSpec::Times(TimeWindowSpec { hz: 30.0, history: 1, horizon: 8, causal: false });
    let world = 3;
    let (mut owners, mut seen, mut lengths) = (std::collections::HashMap::new(), HashSet::new(), HashSet::new());
    let mut total = 0;
    for rank in 0..world {
        let config = LoaderConfig {
            shard: Shard::new(rank, world).unwrap(),
            shard_by: ShardBy::Episodes,
            seed: 2,
            ..LoaderConfig::new(&["actions"], windows.clone(), 8)
        };
        let loader = Loader::new(&Device::Cpu, dataset.clone(), config).unwrap();
        total = loader.windows();
        assert_eq!(loader.samples_per_epoch(), total.div_ceil(world));
        for epoch in 0..2 {
            let mut count = 0;
            for batch in loader.epoch(epoch) {
                let batch = batch.unwrap();
                count += batch.len();
                for (&sample, &episode) in batch.samples.iter().zip(&batch.episodes) {
                    assert_eq!(*owners.entry(episode).or_insert(rank), rank, "episode {episode} read by two ranks");
                    seen.insert(sample);
                }
            }
            lengths.insert(count);
        }
    }
    assert_eq!(lengths.len(), 1, "every rank yields as many windows: {lengths:?}");
    // Every episode belongs to one rank; a rank whose episodes hold more
    // than its ⌈N/W⌉ windows leaves a few of them out each epoch.
    assert_eq!(owners.len(), dataset.len(), "every episode read, each by one rank");
    assert!(seen.len() <= total && seen.len() + world * 50 >= total, "{} of {total} windows read", seen.len());
    // More ranks than episodes: a clear error, not an idle rank.
    let config = LoaderConfig {
        shard: Shard::new(0, 8).unwrap(),
        shard_by: ShardBy::Episodes,
        ..LoaderConfig::new(&["actions"], windows.clone(), 8)
    };
    let error = Loader::new(&Device::Cpu, dataset.clone(), config).unwrap_err();
    assert!(error.to_string().contains("gets no window"), "{error}");
}

#[test]
fn the_next_epoch_starts_ahead_and_equals_a_fresh_one() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = dataset(&dir);
    let windows = WindowSpec::Times(TimeWindowSpec { hz: 30.0, history: 1, horizon: 8, causal: false });
    let config =
        LoaderConfig { workers: 2, seed: 4, ..LoaderConfig::new(&["actions", "obs/agentview_image"], windows, 6) };
    // Each batch's samples and its camera stream's values.
    let read = |epoch: robocache::Epoch| {
        epoch
            .map(|b| {
                let b = b.unwrap();
                let image = b.stream("obs/agentview_image").unwrap().data.to_vec::<u8>().unwrap();
                (b.samples, image)
            })
            .collect::<Vec<_>>()
    };
    let fresh = |epoch| read(Loader::new(&Device::Cpu, dataset.clone(), config.clone()).unwrap().epoch(epoch));
    let loader = Loader::new(&Device::Cpu, dataset.clone(), config.clone()).unwrap();
    assert_eq!(loader.started_ahead(), None);
    let mut epoch = loader.epoch(2);
    epoch.next().unwrap().unwrap();
    assert_eq!(loader.started_ahead(), None, "not while more than `workers` batches are left");
    assert_eq!(read(epoch).len() + 1, loader.batches_per_epoch());
    assert_eq!(loader.started_ahead(), Some(3), "started while epoch 2 handed over its last batches");
    assert_eq!(read(loader.epoch(3)), fresh(3));
    assert_eq!(loader.started_ahead(), Some(4));
    // Another epoch, or epoch 4 resumed mid-way: the one started ahead is dropped.
    assert_eq!(read(loader.epoch_from(4, 2)), fresh(4)[2..]);
    assert_eq!(loader.started_ahead(), Some(5));
    assert_eq!(read(loader.epoch(7)), fresh(7));
    assert_eq!(loader.started_ahead(), Some(8));
    drop(loader); // the epoch started ahead stops with it
}

#[test]
fn normalization_statistics_round_trip_and_apply() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = dataset(&dir);
    let stats =
        Normalization::compute(&dataset, &["actions", "obs/robot0_eef_quat"], NormalizationMode::ZScore).unwrap();
    let actions = &stats.streams["actions"];
    assert_eq!(actions.mean.len(), 7);
    for c in 0..7 {
        assert!(
            actions.min[c] <= actions.p01[c] && actions.p01[c] <= actions.p99[c] && actions.p99[c] <= actions.max[c]
        );
        assert!(actions.std[c] > 0.0);
    }
    let path = dir.path().join("stats.json");
    stats.save(&path).unwrap();
    assert_eq!(Normalization::load(&path).unwrap(), stats);

    let spec = WindowSpec::Steps(StepWindowSpec { seq_length: 4, ..Default::default() });
    let streams = ["actions", "obs/robot0_eef_quat"];
    let config = LoaderConfig { normalization: Some(stats.clone()), ..LoaderConfig::new(&streams, spec.clone(), 64) };
    let normalized = Loader::new(&Device::Cpu, dataset.clone(), config).unwrap();
    let plain = Loader::new(&Device::Cpu, dataset.clone(), LoaderConfig::new(&streams, spec.clone(), 64)).unwrap();
    let (a, b) = (normalized.epoch(0).next().unwrap().unwrap(), plain.epoch(0).next().unwrap().unwrap());
    let (x, y) = (a.streams[0].data.to_vec::<f32>().unwrap(), b.streams[0].data.to_vec::<f32>().unwrap());
    for (i, (&x, &y)) in x.iter().zip(&y).enumerate() {
        let c = i % 7;
        let expected = (f64::from(y) - actions.mean[c]) / actions.std[c];
        assert!((f64::from(x) - expected).abs() < 1e-5, "{x} vs {expected}");
    }
    // Quaternions are left as they are.
    assert_eq!(a.streams[1].data.to_host().unwrap(), b.streams[1].data.to_host().unwrap());
    assert!(Normalization::compute(&dataset, &["obs/agentview_image"], NormalizationMode::MinMax).is_err());
}

#[test]
fn bad_configurations_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = dataset(&dir);
    let windows = WindowSpec::Steps(StepWindowSpec::default());
    let make =
        |config: LoaderConfig| Loader::new(&Device::Cpu, dataset.clone(), config).map(|_| ()).unwrap_err().to_string();
    assert!(make(LoaderConfig::new(&["actions"], windows.clone(), 0)).contains("batch_size"));
    assert!(make(LoaderConfig::new(&[], windows.clone(), 4)).contains("at least one stream"));
    assert!(make(LoaderConfig::new(&["nope"], windows.clone(), 4)).contains("no stream `nope`"));
    let resident_images =
        LoaderConfig { mode: LoaderMode::Resident, ..LoaderConfig::new(&["obs/agentview_image"], windows.clone(), 4) };
    assert!(make(resident_images).contains("image stream"));
    // A stream on its own clock cannot be cut into step windows.
    let loader = Loader::new(
        &Device::Cpu,
        dataset.clone(),
        LoaderConfig { mode: LoaderMode::Streaming, ..LoaderConfig::new(&["obs/joint_pos"], windows.clone(), 4) },
    )
    .unwrap();
    let err = loader.epoch(0).next().unwrap().unwrap_err().to_string();
    assert!(err.contains("own clock"), "{err}");
    // Step windows convert camera frames too (backends.rs checks the
    // values); a crop that does not fit the camera fails when the loader is
    // made, naming the stream.
    let crop_outside = LoaderConfig {
        frames: FrameOutput {
            layout: FrameLayout::Chw,
            dtype: FrameDType::F32,
            resize: Some(FrameResize {
                width: 2,
                height: 2,
                crop: Some(CropBox { left: 3, top: 0, width: 4, height: 4 }),
            }),
        },
        ..LoaderConfig::new(&["actions", "obs/agentview_image"], windows.clone(), 4)
    };
    let error = make(crop_outside);
    assert!(error.contains("obs/agentview_image"), "{error}");
}

/// Camera video of a LeRobot root (the AV1 fixture LeRobot wrote) through a
/// loader of delta windows: the frames asked for channels first in float32
/// are the default u8 `[B, T, H, W, 3]` frames moved and divided by 255, and
/// those equal the dataset's RGB frames read on the host.
#[test]
fn lerobot_video_frames_come_as_the_loader_asks() {
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../robocache-datasets/tests/fixtures/lerobot/av1");
    let dataset = Arc::new(Dataset::open(&root).unwrap());
    let camera = "observation.images.front";
    let deltas = DeltaTimestamps::new(vec![(camera.into(), vec![-0.1, 0.0, 0.2])]);
    let config = |frames| LoaderConfig {
        shuffle: false,
        frames,
        ..LoaderConfig::new(&[camera, "action"], WindowSpec::Deltas(deltas.clone()), 8)
    };
    let hwc = Loader::new(&Device::Cpu, dataset.clone(), config(FrameOutput::default())).unwrap();
    let chw = FrameOutput { layout: FrameLayout::Chw, dtype: FrameDType::F32, resize: None };
    let float = Loader::new(&Device::Cpu, dataset.clone(), config(chw)).unwrap();
    // Cropped to the middle and resized to 24x20, channels first.
    let crop = CropBox { left: 8, top: 2, width: 32, height: 28 };
    let small = FrameOutput {
        layout: FrameLayout::Chw,
        dtype: FrameDType::U8,
        resize: Some(FrameResize { width: 24, height: 20, crop: Some(crop) }),
    };
    let resized = Loader::new(&Device::Cpu, dataset.clone(), config(small)).unwrap();
    let windows = robocache::datasets::DeltaWindows::new(dataset.info(), &deltas).unwrap();
    let (height, width) = (32, 48);
    for (batch, ((a, b), c)) in hwc.epoch(0).zip(float.epoch(0)).zip(resized.epoch(0)).enumerate() {
        let (a, b, c) = (a.unwrap(), b.unwrap(), c.unwrap());
        let (a, b, c) = (a.stream(camera).unwrap(), b.stream(camera).unwrap(), c.stream(camera).unwrap());
        let n = a.data.shape()[0];
        // The resized frames are the u8 frames converted on their own.
        assert_eq!(c.data.shape(), [n, 3, 3, 20, 24]);
        let frames = a.data.clone().reshape(&[n * 3, height, width, 3]).unwrap();
        let want = Device::Cpu.convert_frames(&frames, small).unwrap().to_vec::<u8>().unwrap();
        assert!(c.data.to_vec::<u8>().unwrap() == want, "batch {batch}: resized frames");
        assert_eq!(a.data.shape(), [n, 3, height, width, 3]);
        assert_eq!(b.data.shape(), [n, 3, 3, height, width]);
        assert_eq!(a.mask.to_vec::<bool>().unwrap(), b.mask.to_vec::<bool>().unwrap());
        let (levels, floats) = (a.data.to_vec::<u8>().unwrap(), b.data.to_vec::<f32>().unwrap());
        let pixels = height * width;
        for frame in 0..n * 3 {
            for p in 0..pixels {
                for c in 0..3 {
                    let level = levels[(frame * pixels + p) * 3 + c];
                    let value = floats[(frame * 3 + c) * pixels + p];
                    assert_eq!(
                        value.to_bits(),
                        (level as f32 / 255.0).to_bits(),
                        "frame {frame} pixel {p} channel {c}"
                    );
                }
            }
        }
        // The u8 frames equal the dataset's RGB rows read on the host.
        if batch == 0 {
            let window = windows.window(0).unwrap();
            let mut rgb = vec![0u8; 3 * pixels * 3];
            dataset.read_delta_window_into(&window, camera, windows.offsets_of(camera).unwrap(), &mut rgb).unwrap();
            assert!(levels[..rgb.len()] == rgb[..], "window 0's frames");
        }
    }
}

/// Camera frames stored as images (the `images` fixture LeRobot wrote):
/// a loader asked for other frames converts them as it converts video, and
/// a crop that does not fit the frames fails when the loader is made,
/// naming the stream.
#[test]
fn lerobot_image_frames_convert_as_video_frames_do() {
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../robocache-datasets/tests/fixtures/lerobot/images");
    let dataset = Arc::new(Dataset::open(&root).unwrap());
    let camera = "observation.images.wrist";
    let deltas = DeltaTimestamps::new(vec![(camera.into(), vec![-0.1, 0.0])]);
    let config = |frames| LoaderConfig {
        shuffle: false,
        frames,
        ..LoaderConfig::new(&[camera, "action"], WindowSpec::Deltas(deltas.clone()), 8)
    };
    let small = FrameOutput {
        layout: FrameLayout::Chw,
        dtype: FrameDType::F32,
        resize: Some(FrameResize { width: 16, height: 12, crop: None }),
    };
    let plain = Loader::new(&Device::Cpu, dataset.clone(), config(FrameOutput::default())).unwrap();
    let converted = Loader::new(&Device::Cpu, dataset.clone(), config(small)).unwrap();
    for (a, b) in plain.epoch(0).zip(converted.epoch(0)) {
        let (a, b) = (a.unwrap(), b.unwrap());
        let (a, b) = (a.stream(camera).unwrap(), b.stream(camera).unwrap());
        let n = a.data.shape()[0];
        assert_eq!(a.data.shape(), [n, 2, 32, 48, 3]);
        assert_eq!(b.data.shape(), [n, 2, 3, 12, 16]);
        let frames = a.data.clone().reshape(&[n * 2, 32, 48, 3]).unwrap();
        let want = Device::Cpu.convert_frames(&frames, small).unwrap().to_vec::<f32>().unwrap();
        let got = b.data.to_vec::<f32>().unwrap();
        assert!(got.iter().map(|v| v.to_bits()).eq(want.iter().map(|v| v.to_bits())));
        assert_eq!(a.mask.to_vec::<bool>().unwrap(), b.mask.to_vec::<bool>().unwrap());
    }
    let past = FrameOutput {
        resize: Some(FrameResize {
            width: 8,
            height: 8,
            crop: Some(CropBox { left: 40, top: 0, width: 16, height: 8 }),
        }),
        ..FrameOutput::default()
    };
    let error = Loader::new(&Device::Cpu, dataset, config(past)).map(|_| ()).unwrap_err().to_string();
    assert!(error.contains(camera) && error.contains("past the 48x32 frame"), "{error}");
}

/// A batch decodes its cameras at once, each on a thread of its own: its
/// frames equal those of each camera read alone, and where cameras fail it
/// fails with the error of the first camera asked for, as when they are
/// read in turn.
#[test]
fn cameras_decoded_at_once_equal_each_alone_and_fail_in_order() {
    use robocache::datasets::DeltaWindows;

    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../robocache-datasets/tests/fixtures/lerobot/av1");
    let cameras = ["observation.images.front", "observation.images.wrist"];
    let deltas = DeltaTimestamps::new(cameras.iter().map(|c| ((*c).to_owned(), vec![-0.1, 0.0])).collect());
    let batch = |root: &std::path::Path, streams: &[&str]| {
        let dataset = Dataset::open(root).unwrap();
        let windows = DeltaWindows::new(dataset.info(), &deltas).unwrap();
        let samples: Vec<usize> = (0..windows.len()).step_by(3).collect();
        Device::Cpu.delta_window_batch(&dataset, &windows, &samples, streams)
    };
    let together = batch(&fixture, &cameras).unwrap();
    for (at, camera) in cameras.iter().enumerate() {
        let alone = batch(&fixture, &[camera]).unwrap();
        let (want, got) = (&alone.streams[0], &together.streams[at]);
        assert_eq!(got.name, *camera);
        assert_eq!(got.data.to_vec::<u8>().unwrap(), want.data.to_vec::<u8>().unwrap(), "{camera}");
        assert_eq!(got.mask.to_vec::<bool>().unwrap(), want.mask.to_vec::<bool>().unwrap(), "{camera}");
    }

    let scratch = tempfile::tempdir().unwrap();
    let truncate = |root: &std::path::Path, camera: &str| {
        let video = root.join(format!("videos/{camera}/chunk-000/file-000.mp4"));
        let bytes = std::fs::read(&video).unwrap();
        std::fs::write(&video, &bytes[..bytes.len() / 2]).unwrap();
    };
    let root = scratch.path().join("wrist");
    robocache_datasets::testing::copy_tree(&fixture, &root).unwrap();
    truncate(&root, cameras[1]);
    let error = batch(&root, &cameras).map(|_| ()).unwrap_err().to_string();
    assert!(error.contains(cameras[1]) && error.contains("truncated"), "{error}");
    truncate(&root, cameras[0]);
    let error = batch(&root, &cameras).map(|_| ()).unwrap_err().to_string();
    assert!(error.contains(cameras[0]) && error.contains("truncated"), "{error}");
}
