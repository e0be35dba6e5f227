//! Step windows against robomimic's own `SequenceDataset` on the same file,
//! time-window anchors, and sampling over windows.

mod support;

use robocache_cpu::HostVec;
use robocache_datasets::{
    Dataset, Error, OpenOptions, Sampler, Shard, StepWindowSpec, StepWindows, StreamTimes, TimeWindowSpec, TimeWindows,
};
use support::{fixture, make};

/// `npz[name]` as a HostVec of its own dtype (robomimic keeps the file's dtypes).
fn npz_array(archive: &mut npyz::npz::NpzArchive<std::io::BufReader<std::fs::File>>, name: &str) -> HostVec {
    let npy = archive.by_name(name).unwrap().unwrap_or_else(|| panic!("reference has no {name}"));
    robocache_datasets::npy::read_array(npy, u64::MAX).unwrap().data
}

#[test]
fn step_windows_equal_robomimic_sequence_dataset() {
    let (dir, path) = fixture("robomimic", "lift.hdf5", &[]);
    // (seq_length, frame_stack, pad_seq_length, pad_frame_stack, split); demo lengths are
    // 7, 1, 3, 5, 12; the split `long` holds the demos of 5 steps or more.
    let cases = [
        (1, 1, true, true, None),
        (3, 2, true, true, None),
        (10, 1, true, true, None),
        (16, 3, true, true, None),
        (1, 1, false, false, None),
        (2, 4, true, false, Some("long")),
        (3, 1, false, true, Some("long")),
        (1, 2, false, false, Some("long")),
        (2, 3, false, false, Some("long")),
        (5, 1, false, true, Some("long")),
        (4, 2, false, false, Some("long")),
        (2, 2, true, false, Some("long")),
        // Too short without padding: robomimic asserts on demo_1 (1 step).
        (2, 3, false, false, None),
        (1, 2, true, false, None),
        (3, 1, false, true, None),
        // demo_3 (5 steps) cannot hold 4 + 2 - 1 steps.
        (4, 3, false, false, Some("long")),
    ];
    let streams = [
        ("actions", "actions"),
        ("rewards", "rewards"),
        ("dones", "dones"),
        ("obs/robot0_eef_pos", "obs/robot0_eef_pos"),
        ("obs/robot0_eef_quat", "obs/robot0_eef_quat"),
        ("obs/agentview_image", "obs/agentview_image"),
        ("next_obs/robot0_eef_pos", "next_obs/robot0_eef_pos"),
        ("next_obs/agentview_image", "next_obs/agentview_image"),
    ];
    let (mut compared, mut too_short) = (0, 0);
    for (seq, fs, pad_seq, pad_fs, split) in cases {
        let reference = dir.path().join(format!("ref-{seq}-{fs}-{pad_seq}-{pad_fs}-{split:?}.npz"));
        let flag = |b: bool| if b { "1" } else { "0" };
        make(
            &[
                "robomimic-reference",
                path.to_str().unwrap(),
                reference.to_str().unwrap(),
                &seq.to_string(),
                &fs.to_string(),
                flag(pad_seq),
                flag(pad_fs),
                split.unwrap_or(""),
            ][..if split.is_some() { 8 } else { 7 }],
        );
        let options = OpenOptions { split: split.map(str::to_owned), ..Default::default() };
        let dataset = Dataset::open_with(&path, &options).unwrap();
        let mut archive = npyz::npz::NpzArchive::open(&reference).unwrap();
        let spec = StepWindowSpec {
            seq_length: seq,
            frame_stack: fs,
            pad_seq_length: pad_seq,
            pad_frame_stack: pad_fs,
            max_pad_after: None,
        };
        let windows = StepWindows::new(dataset.info(), &spec);
        if archive.by_name("error").unwrap().is_some() {
            match windows {
                Err(Error::EpisodeTooShort { episode, .. }) => {
                    assert_eq!(episode, if split.is_some() { "demo_3" } else { "demo_1" })
                }
                other => panic!("{spec:?}: robomimic asserts, robocache gave {other:?}"),
            }
            too_short += 1;
            continue;
        }
        let windows = windows.unwrap();
        let len = match npz_array(&mut archive, "len") {
            HostVec::I64(v) => v[0] as usize,
            other => panic!("len is {other:?}"),
        };
        assert_eq!(windows.len(), len, "{spec:?}: number of samples");
        for sample in 0..len {
            let window = windows.window(sample).unwrap();
            let mask = window.pad_mask();
            for key in ["pad_mask", "obs/pad_mask", "next_obs/pad_mask"] {
                assert_eq!(
                    npz_array(&mut archive, &format!("s{sample}/{key}")),
                    HostVec::Bool(mask.clone()),
                    "{spec:?} s{sample} {key}"
                );
            }
            for (stream, key) in streams {
                let ours = dataset.read_step_window(&window, stream).unwrap();
                let theirs = npz_array(&mut archive, &format!("s{sample}/{key}"));
                assert_eq!(ours, theirs, "{spec:?} sample {sample} ({window:?}) stream {stream}");
                compared += 1;
            }
        }
    }
    assert_eq!(too_short, 4);
    assert!(compared > 1000, "{compared} windows compared");
}

#[test]
fn step_windows_reject_streams_on_their_own_clock() {
    let (_dir, path) = fixture("robomimic", "lift.hdf5", &[]);
    let dataset = Dataset::open(&path).unwrap();
    let windows = StepWindows::new(dataset.info(), &StepWindowSpec::default()).unwrap();
    let err = dataset.read_step_window(&windows.window(0).unwrap(), "obs/joint_pos_fast").unwrap_err().to_string();
    assert!(err.contains("own clock") && err.contains("time windows"), "{err}");
    assert!(windows.window(windows.len()).is_err());
    assert!(StepWindows::new(dataset.info(), &StepWindowSpec { seq_length: 0, ..Default::default() }).is_err());
}

#[test]
fn time_window_anchors_cover_each_episode_on_the_policy_clock() {
    let (_dir, path) = fixture("robomimic", "lift.hdf5", &[]);
    let dataset = Dataset::open(&path).unwrap();
    let spec = TimeWindowSpec { hz: 50.0, history: 2, horizon: 8, causal: false };
    // actions at 20 Hz (demo_10: 12 steps, 0..0.55 s), joint_pos_fast at 100 Hz (60 rows, 0..0.59 s).
    let windows = TimeWindows::new(&dataset, &["actions", "obs/joint_pos_fast"], &spec).unwrap();
    let lens = [7usize, 1, 3, 5, 12];
    let expected: usize = lens.iter().map(|&n| ((5 * n - 1) as f64 / 100.0 * 50.0 + 1e-9).floor() as usize + 1).sum();
    assert_eq!(windows.len(), expected);
    let last = windows.window(windows.len() - 1).unwrap();
    assert_eq!(last.episode, 4);
    assert!((last.anchor - 0.58).abs() < 1e-12, "{last:?}");
    let targets = windows.targets(&last);
    assert_eq!(targets.len(), 10);
    assert!((targets[0] - 0.54).abs() < 1e-12 && (targets[9] - 0.72).abs() < 1e-12);

    // Rows that bracket a time range, for uniform and explicit timelines.
    let times = dataset.times(4, "actions").unwrap();
    assert_eq!(times.rows_covering(0.12, 0.31), 2..8);
    assert_eq!(times.rows_covering(-1.0, -0.5), 0..1);
    assert_eq!(times.rows_covering(0.55, 9.0), 11..12);
    let explicit = StreamTimes::Explicit(vec![0.0, 0.1, 0.25, 0.3].into());
    assert_eq!(explicit.rows_covering(0.1, 0.26), 1..4);
    assert_eq!(explicit.rows_covering(0.05, 0.05), 0..2);

    assert!(TimeWindows::new(&dataset, &["nope"], &spec).is_err());
    assert!(
        TimeWindows::new(&dataset, &[], &TimeWindowSpec { hz: 0.0, history: 0, horizon: 1, causal: false }).is_err()
    );
}

#[test]
fn every_window_once_per_epoch_across_ranks() {
    let (_dir, path) = fixture("robomimic", "lift.hdf5", &[]);
    let dataset = Dataset::open(&path).unwrap();
    let windows = StepWindows::new(dataset.info(), &StepWindowSpec { seq_length: 4, ..Default::default() }).unwrap();
    for world in 1..=4 {
        let mut seen = vec![0; windows.len()];
        for rank in 0..world {
            for sample in Sampler::new(windows.len(), 3, Shard::new(rank, world).unwrap()).unwrap().epoch(5) {
                seen[windows.window(sample).unwrap().sample] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "world {world}: {seen:?}");
    }
}
