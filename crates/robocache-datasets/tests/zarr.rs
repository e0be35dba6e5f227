//! Zarr replay buffers written by zarr-python (2.x: directory and zip
//! stores, Blosc/Zstd/GZip/no compressor, imagecodecs' JPEG XL; 3.x: its
//! default codecs), committed with what zarr-python reads back from them
//! (`fixtures/make_zarr_fixtures.py`): every array of every episode equal.

mod support;

use std::path::{Path, PathBuf};

use robocache_cpu::HostVec;
use robocache_datasets::{Dataset, Format, OpenOptions, StepWindowSpec, StepWindows};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/zarr").join(name)
}

/// The largest difference between `read` and the reference's bytes.
fn largest_difference<R: std::io::Read>(read: &HostVec, expected: npyz::NpyFile<R>) -> f64 {
    match read {
        HostVec::U8(values) => {
            let expected: Vec<u8> = expected.into_vec().unwrap();
            assert_eq!(values.len(), expected.len());
            values.iter().zip(&expected).map(|(a, b)| (i32::from(*a) - i32::from(*b)).abs()).max().unwrap_or(0).into()
        }
        HostVec::F32(values) => bits_differ(values, expected.into_vec().unwrap(), f32::to_bits),
        HostVec::F64(values) => bits_differ(values, expected.into_vec().unwrap(), f64::to_bits),
        other => panic!("{} was not written", other.dtype()),
    }
}

/// 0 where `values` equal `expected` bit for bit, else infinity.
fn bits_differ<T: Copy, B: PartialEq>(values: &[T], expected: Vec<T>, bits: fn(T) -> B) -> f64 {
    assert_eq!(values.len(), expected.len());
    if values.iter().zip(&expected).all(|(a, b)| bits(*a) == bits(*b)) {
        0.0
    } else {
        f64::INFINITY
    }
}

/// Every array equals the reference, concatenated over the episodes; the
/// largest difference of each (JPEG XL frames may differ from libjxl's by a level).
fn compare(dataset: &Dataset, reference: &str) -> Vec<(String, f64)> {
    let bytes = std::fs::read(fixture(reference)).unwrap();
    let mut archive = npyz::npz::NpzArchive::new(std::io::Cursor::new(bytes)).unwrap();
    let ends: Vec<i64> = archive.by_name("meta/episode_ends").unwrap().unwrap().into_vec().unwrap();
    let lengths: Vec<usize> = dataset.info().episodes.iter().map(|e| e.len).collect();
    let mut at = 0;
    let expected_lengths: Vec<usize> = ends
        .iter()
        .map(|&e| {
            let n = e as usize - at;
            at = e as usize;
            n
        })
        .collect();
    assert_eq!(lengths, expected_lengths, "episodes cut at meta/episode_ends");
    let names: Vec<String> = archive.array_names().filter(|n| n.starts_with("data/")).map(str::to_owned).collect();
    let mut out = Vec::new();
    for name in names {
        let key = name.strip_prefix("data/").unwrap();
        let mut read: Option<HostVec> = None;
        for episode in 0..dataset.len() {
            let part = dataset.read_stream(episode, key).unwrap_or_else(|e| panic!("{key}: {e}"));
            read = Some(match (read, part) {
                (None, part) => part,
                (Some(HostVec::U8(mut all)), HostVec::U8(more)) => {
                    all.extend(more);
                    HostVec::U8(all)
                }
                (Some(HostVec::F32(mut all)), HostVec::F32(more)) => {
                    all.extend(more);
                    HostVec::F32(all)
                }
                (Some(HostVec::F64(mut all)), HostVec::F64(more)) => {
                    all.extend(more);
                    HostVec::F64(all)
                }
                (Some(all), part) => panic!("{key}: {} then {}", all.dtype(), part.dtype()),
            });
        }
        let read = read.unwrap();
        let expected = archive.by_name(&name).unwrap().unwrap();
        out.push((key.to_owned(), largest_difference(&read, expected)));
    }
    out
}

#[test]
fn diffusion_policys_replay_buffers_read_as_zarr_python_reads_them() {
    for (store, reference, zarr_format) in [
        ("pusht_v2.zarr", "pusht_v2.npz", 2),
        ("pusht_v2.zarr.zip", "pusht_v2.npz", 2),
        ("pusht_v3.zarr", "pusht_v3.npz", 3),
    ] {
        let dataset = Dataset::open(fixture(store)).unwrap_or_else(|e| panic!("{store}: {e}"));
        let info = dataset.info();
        assert_eq!(info.format, Format::Zarr, "{store}");
        assert_eq!(info.rate_hz, 10.0, "{store}: PushT's rate from the table");
        assert_eq!(info.metadata["zarr_format"], zarr_format, "{store}");
        assert_eq!(info.metadata["layout"], "diffusion-policy-pusht");
        let image = info.episodes[0].stream("img").unwrap();
        assert!(image.is_image() && image.step_shape == [24, 24, 3], "{store}: {image:?}");
        assert!(!info.episodes[0].stream("keypoint").unwrap().is_image(), "keypoints [9, 2] are values, not an image");
        let compared = compare(&dataset, reference);
        assert_eq!(compared.len(), 5, "{store}: {compared:?}");
        for (key, difference) in compared {
            assert_eq!(difference, 0.0, "{store}: {key} differs from zarr-python's reading");
        }
        let windows = StepWindows::new(info, &StepWindowSpec { seq_length: 4, ..Default::default() }).unwrap();
        assert_eq!(dataset.read_step_window(&windows.window(0).unwrap(), "action").unwrap().len(), 4 * 2);
        // The image chunks kept decompressed (the frame cache's budget):
        // the same frames, read twice, as without; a budget of one chunk
        // evicts as it goes and still reads the same.
        let uncached: Vec<HostVec> = (0..info.episodes.len()).map(|e| dataset.read_stream(e, "img").unwrap()).collect();
        for budget in [64 << 20, 24 * 24 * 3 * 4] {
            dataset.set_frame_cache_budget(budget);
            for _ in 0..2 {
                for (episode, expected) in uncached.iter().enumerate() {
                    assert_eq!(&dataset.read_stream(episode, "img").unwrap(), expected, "{store} budget {budget}");
                    let (HostVec::U8(rows), HostVec::U8(whole)) =
                        (dataset.read_rows(episode, "img", 1..3).unwrap(), expected)
                    else {
                        panic!("{store}: img is not bytes")
                    };
                    assert_eq!(rows[..], whole[24 * 24 * 3..3 * 24 * 24 * 3], "{store} episode {episode} rows 1..3");
                }
            }
        }
        dataset.set_frame_cache_budget(0);
    }
}

#[test]
fn umis_jpeg_xl_cameras_decode_within_a_level_of_imagecodecs() {
    let dataset = Dataset::open(fixture("umi_v2.zarr.zip")).unwrap();
    let info = dataset.info();
    assert_eq!(info.metadata["layout"], "umi");
    assert!((info.rate_hz - 59.94).abs() < 0.01, "{}", info.rate_hz);
    let camera = info.episodes[2].stream("camera0_rgb").unwrap();
    assert!(camera.is_image() && camera.step_shape == [32, 40, 3]);
    for (key, difference) in compare(&dataset, "umi_v2.npz") {
        let bound = if key == "camera0_rgb" { 1.0 } else { 0.0 };
        assert!(difference <= bound, "{key}: differs from imagecodecs/zarr-python's reading by {difference}");
    }
}

#[test]
fn a_buffer_of_unknown_arrays_needs_a_rate_and_the_error_says_how() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("mine.zarr");
    robocache_datasets::testing::copy_tree(&fixture("pusht_v2.zarr"), &copy).unwrap();
    std::fs::remove_dir_all(copy.join("data/keypoint")).unwrap();
    let text = Dataset::open(&copy).unwrap_err().to_string();
    assert!(text.contains("stores no rate") && text.contains("rate_hz"), "{text}");
    let dataset = Dataset::open_with(&copy, &OpenOptions { rate_hz: Some(15.0), ..Default::default() }).unwrap();
    assert_eq!(dataset.info().rate_hz, 15.0);
    assert_eq!(dataset.info().metadata["layout"], "replay-buffer");
}

/// A copy of the PushT buffer (format 2, directory) with `edit` applied.
fn damaged(edit: impl FnOnce(&Path)) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("pusht.zarr");
    robocache_datasets::testing::copy_tree(&fixture("pusht_v2.zarr"), &copy).unwrap();
    edit(&copy);
    (dir, copy)
}

/// Rewrites the JSON at `path` through `change`.
fn edit_json(path: &Path, change: impl FnOnce(&mut serde_json::Value)) {
    let mut value: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    change(&mut value);
    std::fs::write(path, serde_json::to_vec(&value).unwrap()).unwrap();
}

/// Crafted stores: an error naming the store, the array (and chunk) and
/// what is wrong, before anything a header claims is allocated.
#[test]
fn crafted_buffers_are_clear_errors() {
    type Edit = Box<dyn FnOnce(&Path)>;
    let cases: Vec<(&str, Edit, &[&str])> = vec![
        (
            "episode ends past the data",
            Box::new(|root: &Path| {
                // 40 rows in every array; the ends now claim 4000.
                let ends = root.join("meta/episode_ends");
                edit_json(&ends.join(".zarray"), |v| v["dtype"] = "<i8".into());
                std::fs::write(
                    ends.join("0"),
                    [12i64, 25, 4000].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(),
                )
                .unwrap();
            }),
            &["data/", "4000"],
        ),
        (
            "decreasing episode ends",
            Box::new(|root: &Path| {
                std::fs::write(
                    root.join("meta/episode_ends/0"),
                    [12i64, 5, 40].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(),
                )
                .unwrap();
            }),
            &["meta/episode_ends", "entry 1 is 5 after 12"],
        ),
        (
            "a chunk shape of 2^40 rows",
            Box::new(|root: &Path| {
                edit_json(&root.join("data/state/.zarray"), |v| v["chunks"][0] = (1u64 << 40).into())
            }),
            &["data/state", "exceed"],
        ),
        (
            "an unknown codec",
            Box::new(|root: &Path| {
                edit_json(&root.join("data/action/.zarray"), |v| v["compressor"]["id"] = "nope".into())
            }),
            &["data/action", "cannot be read"],
        ),
        (
            "a truncated chunk",
            Box::new(|root: &Path| {
                let chunk = root.join("data/state/1.0");
                let bytes = std::fs::read(&chunk).unwrap();
                std::fs::write(&chunk, &bytes[..bytes.len() / 2]).unwrap();
            }),
            &["data/state", "rows"],
        ),
        (
            "a row of 2^40 values",
            Box::new(|root: &Path| {
                edit_json(&root.join("data/state/.zarray"), |v| v["shape"][1] = (1u64 << 40).into())
            }),
            &["data/state", "values a row"],
        ),
    ];
    for (case, edit, wanted) in cases {
        let (_dir, root) = damaged(edit);
        let text = support::open_and_verify(case, root);
        for part in wanted {
            assert!(text.contains(part), "{case}: `{part}` in `{text}`");
        }
        assert!(text.contains("pusht.zarr"), "{case}: the store is named in `{text}`");
    }
}

/// A `.zarr.zip` whose entry claims 4 GB uncompressed (a zip bomb's header):
/// refused by its header, before any of it is inflated.
#[test]
fn a_zip_entry_claiming_gigabytes_is_refused() {
    let mut bytes = std::fs::read(fixture("pusht_v2.zarr.zip")).unwrap();
    let name = b"data/state/0.0";
    // The central directory's record of the entry: its uncompressed size (offset 24).
    let central = (0..bytes.len() - 46)
        .find(|&at| bytes[at..at + 4] == [0x50, 0x4b, 0x01, 0x02] && bytes[at + 46..].starts_with(name))
        .expect("the entry's central record");
    bytes[central + 24..central + 28].copy_from_slice(&u32::MAX.to_le_bytes());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bomb.zarr.zip");
    std::fs::write(&path, bytes).unwrap();
    let text = robocache_video::testing::within_deadline("zip bomb", move || match Dataset::open(&path) {
        Ok(dataset) => dataset.read_stream(0, "state").map(|_| String::new()).unwrap_or_else(|e| e.to_string()),
        Err(error) => error.to_string(),
    });
    assert!(text.contains("bomb.zarr.zip") && text.contains("data/state/0.0") && text.contains("4294967295"), "{text}");
}

/// A real robot's buffer (`make_zarr_fixtures.py timed`: wall-clock
/// seconds near 10 Hz with jitter and a stall in `data/timestamp`): those
/// times are every stream's clock, the episodes last as long as they say,
/// the rate is their median step's, the arrays read as zarr-python reads them.
#[test]
fn a_real_robots_timestamps_are_its_clock() {
    use robocache_datasets::StreamTimes;

    let dataset = Dataset::open(fixture("timed_v2.zarr")).unwrap();
    let info = dataset.info();
    assert_eq!(info.metadata["clock"], "data/timestamp");
    assert!((info.rate_hz - 10.0).abs() < 0.3, "the median step's rate: {}", info.rate_hz);
    let bytes = std::fs::read(fixture("timed_v2.npz")).unwrap();
    let mut archive = npyz::npz::NpzArchive::new(std::io::Cursor::new(bytes)).unwrap();
    let times: Vec<f64> = archive.by_name("data/timestamp").unwrap().unwrap().into_vec().unwrap();
    let mut start = 0;
    for (episode, end) in [12usize, 25, 40].into_iter().enumerate() {
        for stream in ["action", "robot_eef_pose", "timestamp"] {
            let StreamTimes::Explicit(clock) = dataset.times(episode, stream).unwrap() else {
                panic!("episode {episode} {stream}: not on the timestamps")
            };
            assert_eq!(&clock[..], &times[start..end], "episode {episode} {stream}");
        }
        assert_eq!(info.episodes[episode].duration_s, times[end - 1] - times[start], "episode {episode}");
        let HostVec::F64(stamps) = dataset.read_stream(episode, "timestamp").unwrap() else { panic!("f64") };
        assert_eq!(stamps[..], times[start..end]);
        start = end;
    }
    let compared = compare(&dataset, "timed_v2.npz");
    assert_eq!(compared.len(), 3, "{compared:?}");
    assert!(compared.iter().all(|(_, d)| *d == 0.0), "{compared:?}");
}
