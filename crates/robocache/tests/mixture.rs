//! A mixture of a LeRobot root, an RLDS dataset and a robomimic file in one
//! batch (on the CPU): each dataset's rows equal its own loader's batch of
//! the same windows, padded to the widest dimension with `dim_is_pad`, a
//! stream a dataset lacks zeros and padding, and the rows drawn as the
//! sampler says.

use std::path::PathBuf;
use std::sync::Arc;

use robocache::datasets::synthetic::{write_robomimic, SyntheticSpec};
use robocache::datasets::{Dataset, DeltaTimestamps, EpochLength, MixtureWeights, OpenOptions, Shard, StepWindowSpec};
use robocache::loader::mixture::{MixtureConfig, MixtureLoader, MixtureMember};
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
        keys: keys.iter().map(|(m, o)| ((*m).to_owned(), (*o).to_owned())).collect(),
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
    };
    let mixture = Arc::new(MixtureLoader::new(&Device::Cpu, members, config).unwrap());
    assert_eq!(mixture.batches_per_epoch(), 4);
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
            for (mixed, own_name) in &member.keys {
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
