//! Every kind of bad file gets an error naming the file and what is wrong
//! in it, never a panic.

mod support;

use robocache_datasets::{Dataset, Error, OpenOptions};
use std::path::PathBuf;

use support::make;

fn bad_file(case: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{case}.hdf5"));
    make(&["bad", case, path.to_str().unwrap()]);
    (dir, path)
}

fn open_error(case: &str) -> (Error, String) {
    let (_dir, path) = bad_file(case);
    // The missing demo is listed in the `train` split.
    let split = (case == "missing-group").then(|| "train".to_owned());
    let err = match Dataset::open_with(&path, &OpenOptions { split, ..Default::default() }) {
        Ok(dataset) => panic!("{case}: opened {} episodes without an error", dataset.len()),
        Err(err) => err,
    };
    let text = err.to_string();
    assert!(text.contains(path.to_str().unwrap()), "{case}: the error does not name the file: {text}");
    (err, text)
}

#[test]
fn bad_files_get_clear_errors() {
    // (case, variant check, words the message must contain)
    type Case = (&'static str, fn(&Error) -> bool, &'static [&'static str]);
    let cases: &[Case] = &[
        ("not-hdf5", |e| matches!(e, Error::NotHdf5 { .. }), &["not an HDF5 file"]),
        ("truncated", |e| matches!(e, Error::Hdf5 { .. }), &["HDF5 error"]),
        ("missing-group", |e| matches!(e, Error::Missing { .. }), &["missing group", "data/demo_2"]),
        ("missing-dataset", |e| matches!(e, Error::Missing { .. }), &["missing dataset", "data/demo_2/actions"]),
        ("missing-attribute", |e| matches!(e, Error::Missing { .. }), &["data/demo_2@num_samples"]),
        ("wrong-rank", |e| matches!(e, Error::Layout { .. }), &["data/demo_2/actions", "scalar"]),
        ("wrong-dtype", |e| matches!(e, Error::Layout { .. }), &["data/demo_2/actions", "not a number"]),
        (
            "length-mismatch",
            |e| matches!(e, Error::Layout { .. }),
            &["data/demo_2/obs/robot0_eef_pos", "2 rows", "demo_2", "3 steps"],
        ),
        ("empty-episode", |e| matches!(e, Error::EmptyEpisode { .. }), &["demo_2", "no steps"]),
        ("bad-demo-name", |e| matches!(e, Error::Layout { .. }), &["data/demo_final", "demo_<number>"]),
        (
            "non-monotonic",
            |e| matches!(e, Error::NonMonotonic { row: 3, .. }),
            &["demo_2", "obs/joint_pos_fast_t", "row 3", "strictly increasing"],
        ),
        ("calvin-segment-missing-attr", |e| matches!(e, Error::Missing { .. }), &["segment_0000000@start_frame"]),
    ];
    for (case, variant, words) in cases {
        let (err, text) = open_error(case);
        assert!(variant(&err), "{case}: unexpected variant {err:?}");
        for word in *words {
            assert!(text.contains(word), "{case}: `{text}` does not mention `{word}`");
        }
    }
}

#[test]
fn missing_and_unknown_files() {
    let dir = tempfile::tempdir().unwrap();
    let err = Dataset::open(dir.path().join("absent.hdf5")).unwrap_err();
    assert!(matches!(err, Error::Io { .. }) && err.to_string().contains("absent.hdf5"), "{err}");
    let (err, text) = open_error("unknown-layout");
    assert!(matches!(err, Error::UnknownFormat { .. }) && text.contains("unknown dataset layout"), "{text}");
}
