//! A mixture of a LeRobot root, an RLDS dataset and a robomimic file in one
//! batch (on the CPU): each dataset's rows equal its own loader's batch of
//! the same windows, padded to the widest dimension with `dim_is_pad`, a
//! stream a dataset lacks zeros and padding, and the rows drawn as the
//! sampler says.

use std::path::PathBuf;
use std::sync::Arc;

use robocache::datasets::synthetic::{write_robomimic, SyntheticSpec};
use robocache::datasets::{Dataset, DeltaTimestamps, EpochLength, MixtureWeights, OpenOptions, Shard, StepWindowSpec};
use robocache::loader::mixture::{MemberKey, MixtureConfig, MixtureLoader, MixtureMember};
use robocache::{Device, Loader, LoaderConfig, MaskKind, WindowSpec};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../robocache-datasets/tests/fixtures")
}

fn member(name: &str, dataset: Dataset, streams: &[&str], windows: WindowSpec, keys: &[(&str, &str)]) -> MixtureMember {
    let config = LoaderConfig { masks: MaskKind::Pad, ..LoaderConfig::new(streams, windows, 8) };
    MixtureMember {
        name: name.into(),
        loader: Arc::new(Loader::new(&Device::Cpu, Arc::new(dataset), config).unwrap()),
        weight: 1.0,
        keys: keys.iter().map(|(m, o)| ((*m).to_owned(), MemberKey::from(*o))).collect(),
    }
}

#[test]
fn a_mixture_batch_is_each_datasets_own_batch_padded_and_concatenated() {
    let dir = tempfile::tempdir().unwrap();
    let robomimic = dir.path().join("lift.hdf5");
    write_robomimic(
        &robomimic,
        &SyntheticSpec { episodes: 3, mean_steps: 20, image: None, seed: 2, ..Default::default() },
    )
    .unwrap();
    let steps = WindowSpec::Steps(StepWindowSpec { seq_length: 4, ..Default::default() });
    let deltas = |names: &[&str]| {
        WindowSpec::Deltas(DeltaTimestamps::new(
            names.iter().map(|n| ((*n).to_owned(), vec![0.0, 0.1, 0.2, 0.3])).collect(),
        ))
    };
    let lerobot = Dataset::open(fixtures().join("lerobot/av1")).unwrap();
    let rlds = Dataset::open_with(
        fixtures().join("rlds/robocache_fixture_dict/1.0.0"),
        &OpenOptions { rate_hz: Some(10.0), ..Default::default() },
    )
    .unwrap();
    let members = vec![
        member(
            "lerobot",
            lerobot,
            &["action", "observation.state"],
            deltas(&["action", "observation.state"]),
            &[("action", "action"), ("state", "observation.state")],
        ),
        member(
            "rlds",
            rlds,
            &["action/world_vector", "observation/state"],
            steps.clone(),
            &[("action", "action/world_vector"), ("state", "observation/state")],
        ),
        member("robomimic", Dataset::open(&robomimic).unwrap(), &["actions"], steps, &[("action", "actions")]),
    ];
    let config = MixtureConfig {
        streams: vec!["action".into(), "state".into()],
        batch_size: 16,
        weights: MixtureWeights::Sample,
        epoch: EpochLength::Windows(64),
        seed: 3,
        shard: Shard::default(),
        drop_last: false,
        workers: 3,
        prefetch: 4,
        batches_together: Some(3),
    };
    let mixture = Arc::new(MixtureLoader::new(&Device::Cpu, members, config).unwrap());
    assert_eq!(mixture.batches_per_epoch(), 4);
    assert_eq!(mixture.run_length(), 3, "runs as set");
    let batches = mixture.epoch_batches(0);
    assert_eq!(batches.iter().map(Vec::len).sum::<usize>(), 64);
    for (index, positions) in batches.iter().enumerate() {
        let batch = mixture.batch_of_epoch(0, index).unwrap();
        // Rows grouped by dataset, each group in the sampler's order.
        let mut expected: Vec<(usize, usize)> = positions.clone();
        expected.sort_by_key(|&(part, _)| part);
        let rows: Vec<(usize, usize)> = batch.datasets.iter().copied().zip(batch.windows.iter().copied()).collect();
        assert_eq!(rows, expected, "batch {index}");
        let action = batch.stream("action").unwrap();
        let state = batch.stream("state").unwrap();
        assert_eq!(action.data.shape(), [positions.len(), 4, 7]);
        assert_eq!(state.data.shape(), [positions.len(), 4, 8]);
        let (values, mask, pad) = (
            action.data.to_vec::<f32>().unwrap(),
            action.mask.to_vec::<bool>().unwrap(),
            action.dim_is_pad.to_vec::<bool>().unwrap(),
        );
        let (state_values, state_mask, state_pad) = (
            state.data.to_vec::<f32>().unwrap(),
            state.mask.to_vec::<bool>().unwrap(),
            state.dim_is_pad.to_vec::<bool>().unwrap(),
        );
        let mut row = 0;
        for (part, member) in mixture.members().iter().enumerate() {
            let windows: Vec<usize> = expected.iter().filter(|(p, _)| *p == part).map(|&(_, w)| w).collect();
            if windows.is_empty() {
                continue;
            }
            let own = member.loader.batch(&windows).unwrap();
            for (mixed, key) in &member.keys {
                let MemberKey::Stream(own_name) = key else { unreachable!("this mixture maps streams only") };
                let stream = own.stream(own_name).unwrap();
                let width = *stream.data.shape().last().unwrap();
                let own_values = stream.data.to_vec::<f32>().unwrap();
                let own_mask = stream.mask.to_vec::<bool>().unwrap();
                let (values, mask, pad, widest) = match mixed.as_str() {
                    "action" => (&values, &mask, &pad, 7),
                    _ => (&state_values, &state_mask, &state_pad, 8),
                };
                for r in 0..windows.len() {
                    for t in 0..4 {
                        let at = ((row + r) * 4 + t) * widest;
                        let from = (r * 4 + t) * width;
                        assert_eq!(
                            values[at..at + width],
                            own_values[from..from + width],
                            "{} {mixed} row {r}",
                            member.name
                        );
                        assert!(values[at + width..at + widest].iter().all(|&v| v == 0.0), "padding is zeros");
                        assert_eq!(mask[(row + r) * 4 + t], own_mask[r * 4 + t]);
                    }
                    let dims = &pad[(row + r) * widest..(row + r + 1) * widest];
                    assert!(
                        dims.iter().enumerate().all(|(d, &p)| p == (d >= width)),
                        "{} {mixed}: {dims:?}",
                        member.name
                    );
                }
            }
            if !member.keys.iter().any(|(m, _)| m == "state") {
                // The robomimic file has no state: zeros, every step padding, every dimension padding.
                for r in 0..windows.len() {
                    assert!(state_values[(row + r) * 32..(row + r + 1) * 32].iter().all(|&v| v == 0.0));
                    assert!(state_mask[(row + r) * 4..(row + r + 1) * 4].iter().all(|&m| m), "Pad masks: true");
                    assert!(state_pad[(row + r) * 8..(row + r + 1) * 8].iter().all(|&p| p));
                }
            }
            row += windows.len();
        }
    }
    // Per dataset: the windows delivered match the weights' shares (equal
    // weights, 64 windows: 22, 21, 21), and the time of each part is counted.
    let report = mixture.telemetry();
    assert_eq!(report.batches, 4);
    assert_eq!(report.members.iter().map(|m| m.windows).sum::<u64>(), 64);
    for member in &report.members {
        assert!((member.share - member.weight_share).abs() <= 1.0 / 64.0, "{member:?}");
        assert!(member.seconds > 0.0, "{member:?}");
    }
    assert_eq!(report.members.iter().map(|m| m.slowest_in).sum::<u64>(), 4, "one slowest part a batch");
    mixture.reset_telemetry();
    assert_eq!(mixture.telemetry().batches, 0);

    // The workers' epoch: the same batches, in order, from any batch on.
    let values = |batch: &robocache::loader::mixture::MixtureBatch| {
        (batch.windows.clone(), batch.stream("action").unwrap().data.to_vec::<f32>().unwrap())
    };
    let direct: Vec<_> = (0..4).map(|i| values(&mixture.batch_of_epoch(1, i).unwrap())).collect();
    let piped: Vec<_> = mixture.epoch(1, 0).map(|b| values(&b.unwrap())).collect();
    assert_eq!(piped, direct);
    let resumed: Vec<_> = mixture.epoch(1, 2).map(|b| values(&b.unwrap())).collect();
    assert_eq!(resumed, direct[2..]);
    // An epoch handed over starts the next one ahead: the same batches.
    let next: Vec<_> = (0..4).map(|i| values(&mixture.batch_of_epoch(2, i).unwrap())).collect();
    let piped: Vec<_> = mixture.epoch(2, 0).map(|b| values(&b.unwrap())).collect();
    assert_eq!(piped, next);
    let after: Vec<_> = mixture.epoch(3, 0).map(|b| values(&b.unwrap())).collect();
    assert_eq!(after, (0..4).map(|i| values(&mixture.batch_of_epoch(3, i).unwrap())).collect::<Vec<_>>());
    // The epoch started ahead (4) does not keep the mixture alive.
    // (A worker holds it while it assembles a run: give it time to finish.)
    let weak = Arc::downgrade(&mixture);
    drop(mixture);
    let freed = (0..500).any(|_| {
        let gone = weak.upgrade().is_none();
        if !gone {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        gone
    });
    assert!(freed, "the mixture is freed with its epoch started ahead");
}

#[test]
fn mixtures_that_cannot_be_batched_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let robomimic = dir.path().join("lift.hdf5");
    write_robomimic(&robomimic, &SyntheticSpec { episodes: 2, image: None, ..Default::default() }).unwrap();
    let open = || Dataset::open(&robomimic).unwrap();
    let steps = |n| WindowSpec::Steps(StepWindowSpec { seq_length: n, ..Default::default() });
    let config = |streams: &[&str]| MixtureConfig {
        streams: streams.iter().map(|s| (*s).to_owned()).collect(),
        batch_size: 4,
        weights: MixtureWeights::Sample,
        epoch: EpochLength::Windows(16),
        seed: 0,
        shard: Shard::default(),
        drop_last: false,
        workers: 1,
        prefetch: 1,
        batches_together: Some(1),
    };
    let err = MixtureLoader::new(
        &Device::Cpu,
        vec![member("a", open(), &["actions"], steps(4), &[("action", "nope")])],
        config(&["action"]),
    )
    .unwrap_err();
    assert!(err.to_string().contains("nope") && err.to_string().contains("`a`"), "{err}");
    let err = MixtureLoader::new(
        &Device::Cpu,
        vec![member("a", open(), &["actions"], steps(4), &[("action", "actions")])],
        config(&["state"]),
    )
    .unwrap_err();
    assert!(err.to_string().contains("`state`"), "{err}");
    // Steps differ between the datasets: an error naming the stream and the dataset.
    let mixture = MixtureLoader::new(
        &Device::Cpu,
        vec![
            member("four", open(), &["actions"], steps(4), &[("action", "actions")]),
            member("two", open(), &["actions"], steps(2), &[("action", "actions")]),
        ],
        config(&["action"]),
    )
    .unwrap();
    let err = mixture.batch(&[(0, 0), (1, 0)]).unwrap_err();
    assert!(err.to_string().contains("`action`") && err.to_string().contains("steps"), "{err}");
}

/// A dataset's key made of two of its streams side by side, and a constant
/// for a key one dataset lacks: the rows of the first equal its own batch's
/// joint positions then gripper, padding where either is; the constant is
/// its value at every step, valid; the dataset without it is padding.
#[test]
fn keys_concatenate_streams_and_fill_constants() {
    let dir = tempfile::tempdir().unwrap();
    let robomimic = dir.path().join("lift.hdf5");
    write_robomimic(
        &robomimic,
        &SyntheticSpec { episodes: 3, mean_steps: 20, image: None, seed: 4, ..Default::default() },
    )
    .unwrap();
    let steps = WindowSpec::Steps(StepWindowSpec { seq_length: 3, ..Default::default() });
    let rlds = Dataset::open_with(
        fixtures().join("rlds/robocache_fixture_dict/1.0.0"),
        &OpenOptions { rate_hz: Some(10.0), ..Default::default() },
    )
    .unwrap();
    let mut arm = member(
        "robomimic",
        Dataset::open(&robomimic).unwrap(),
        &["obs/robot0_eef_pos", "obs/gripper_closed"],
        steps.clone(),
        &[],
    );
    arm.keys = vec![
        ("state".into(), MemberKey::Concat(vec!["obs/robot0_eef_pos".into(), "obs/gripper_closed".into()])),
        ("mode".into(), MemberKey::Constant(vec![2.0, -1.0])),
    ];
    let other = member("rlds", rlds, &["observation/state"], steps, &[("state", "observation/state")]);
    let config = MixtureConfig {
        streams: vec!["state".into(), "mode".into()],
        batch_size: 12,
        weights: MixtureWeights::Sample,
        epoch: EpochLength::Windows(24),
        seed: 5,
        shard: Shard::default(),
        drop_last: false,
        workers: 1,
        prefetch: 2,
        batches_together: Some(1),
    };
    let mixture =
        MixtureLoader::new(&Device::Cpu, vec![arm, other], MixtureConfig { batches_together: None, ..config }).unwrap();
    assert_eq!(mixture.run_length(), 1, "chosen: one batch a run before any batch is timed");
    let batch = mixture.batch_of_epoch(0, 0).unwrap();
    assert!([1, robocache::loader::mixture::AUTO_RUN_BATCHES].contains(&mixture.run_length()));
    let rows = batch.datasets.len();
    let state = batch.stream("state").unwrap();
    let mode = batch.stream("mode").unwrap();
    assert_eq!(state.data.shape(), [rows, 3, 8], "eef 3 + gripper 1 against RLDS state 8");
    assert_eq!(mode.data.shape(), [rows, 3, 2]);
    let (values, mask, dims) = (
        state.data.to_vec::<f32>().unwrap(),
        state.mask.to_vec::<bool>().unwrap(),
        state.dim_is_pad.to_vec::<bool>().unwrap(),
    );
    let (modes, mode_mask) = (mode.data.to_vec::<f32>().unwrap(), mode.mask.to_vec::<bool>().unwrap());
    let arm_windows: Vec<usize> =
        batch.datasets.iter().zip(&batch.windows).filter(|(d, _)| **d == 0).map(|(_, w)| *w).collect();
    assert!(!arm_windows.is_empty() && arm_windows.len() < rows, "both datasets in the batch");
    let own = mixture.members()[0].loader.batch(&arm_windows).unwrap();
    let eef = own.stream("obs/robot0_eef_pos").unwrap();
    let gripper = own.stream("obs/gripper_closed").unwrap();
    let (eef_values, gripper_values) = (eef.data.to_vec::<f32>().unwrap(), gripper.data.to_vec::<f32>().unwrap());
    let (eef_mask, gripper_mask) = (eef.mask.to_vec::<bool>().unwrap(), gripper.mask.to_vec::<bool>().unwrap());
    for r in 0..arm_windows.len() {
        for t in 0..3 {
            let at = (r * 3 + t) * 8;
            assert_eq!(values[at..at + 3], eef_values[(r * 3 + t) * 3..(r * 3 + t + 1) * 3], "row {r} step {t}");
            assert_eq!(values[at + 3], gripper_values[r * 3 + t], "row {r} step {t}");
            assert!(values[at + 4..at + 8].iter().all(|&v| v == 0.0));
            assert_eq!(mask[r * 3 + t], eef_mask[r * 3 + t] || gripper_mask[r * 3 + t], "Pad masks: either part's");
            assert_eq!(modes[(r * 3 + t) * 2..(r * 3 + t + 1) * 2], [2.0, -1.0]);
            assert!(!mode_mask[r * 3 + t], "a constant is never padding");
        }
        assert_eq!(dims[r * 8..(r + 1) * 8], [false, false, false, false, true, true, true, true]);
    }
    for r in arm_windows.len()..rows {
        assert!(modes[r * 6..(r + 1) * 6].iter().all(|&v| v == 0.0), "the RLDS rows have no mode");
        assert!(mode_mask[r * 3..(r + 1) * 3].iter().all(|&m| m));
    }
    // A key's shape is the mixture's whichever datasets a batch draws: a
    // batch of the arm alone pads its state (4 wide) to the RLDS's 8; a
    // batch of the RLDS alone has the mode it lacks, zeros and padding.
    let arm_only = mixture.batch(&[(0, 0), (0, 5)]).unwrap();
    let state = arm_only.stream("state").unwrap();
    assert_eq!(state.data.shape(), [2, 3, 8]);
    let dims = state.dim_is_pad.to_vec::<bool>().unwrap();
    assert_eq!(dims[..8], [false, false, false, false, true, true, true, true]);
    let own = mixture.members()[0].loader.batch(&[0, 5]).unwrap();
    let eef = own.stream("obs/robot0_eef_pos").unwrap().data.to_vec::<f32>().unwrap();
    assert_eq!(state.data.to_vec::<f32>().unwrap()[8..11], eef[3..6], "row 0 step 1");
    let rlds_only = mixture.batch(&[(1, 0), (1, 2)]).unwrap();
    assert_eq!(rlds_only.stream("state").unwrap().data.shape(), [2, 3, 8]);
    let mode = rlds_only.stream("mode").unwrap();
    assert_eq!(mode.data.shape(), [2, 3, 2]);
    assert!(mode.data.to_vec::<f32>().unwrap().iter().all(|&v| v == 0.0));
    assert!(mode.mask.to_vec::<bool>().unwrap().iter().all(|&m| m), "every step padding");
    assert!(mode.dim_is_pad.to_vec::<bool>().unwrap().iter().all(|&m| m), "every dimension padding");
    // Statistics: the concatenation's are its parts' side by side; the
    // constant's its value without spread.
    let groups = [("arm".to_owned(), vec![0])];
    let stats = mixture.statistics(&groups, robocache::NormalizationMode::ZScore).unwrap();
    let arm = &stats["arm"].streams;
    let parts = robocache::Normalization::compute(
        mixture.members()[0].loader.dataset(),
        &["obs/robot0_eef_pos", "obs/gripper_closed"],
        robocache::NormalizationMode::ZScore,
    )
    .unwrap();
    let joined: Vec<f64> = parts.streams["obs/robot0_eef_pos"]
        .mean
        .iter()
        .chain(&parts.streams["obs/gripper_closed"].mean)
        .copied()
        .collect();
    assert_eq!(arm["state"].mean, joined);
    assert_eq!((arm["mode"].mean.clone(), arm["mode"].std.clone()), (vec![2.0, -1.0], vec![0.0, 0.0]));
    // A constant that is not a number is an error naming the dataset.
    let mut bad = member(
        "robomimic",
        Dataset::open(&robomimic).unwrap(),
        &["obs/robot0_eef_pos"],
        WindowSpec::Steps(StepWindowSpec { seq_length: 3, ..Default::default() }),
        &[],
    );
    bad.keys = vec![("state".into(), MemberKey::Constant(vec![f64::NAN]))];
    let config = MixtureConfig { streams: vec!["state".into()], ..mixture_config() };
    let error = MixtureLoader::new(&Device::Cpu, vec![bad], config).unwrap_err().to_string();
    assert!(error.contains("robomimic") && error.contains("finite"), "{error}");
}

fn mixture_config() -> MixtureConfig {
    MixtureConfig {
        streams: Vec::new(),
        batch_size: 4,
        weights: MixtureWeights::Sample,
        epoch: EpochLength::Windows(8),
        seed: 0,
        shard: Shard::default(),
        drop_last: false,
        workers: 1,
        prefetch: 1,
        batches_together: Some(1),
    }
}
