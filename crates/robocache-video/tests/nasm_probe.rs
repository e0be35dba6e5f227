//! The build script's NASM check (`build/nasm.rs`): what it finds and what
//! a build without NASM says.

#[path = "../build/nasm.rs"]
#[allow(dead_code)]
mod nasm;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use nasm::Probe;

/// A folder holding a `nasm` that prints `version_line`.
fn fake_nasm(dir: &Path, version_line: &str) {
    let program = dir.join("nasm");
    std::fs::write(&program, format!("#!/bin/sh\necho '{version_line}'\n")).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn versions_read_as_nasm_prints_them() {
    assert_eq!(nasm::parse_version("NASM version 2.16.01 compiled on Dec 23 2022"), Some((2, 16)));
    assert_eq!(nasm::parse_version("NASM version 2.14"), Some((2, 14)));
    assert_eq!(nasm::parse_version("NASM version 3.01rc2"), Some((3, 1)));
    assert_eq!(nasm::parse_version("yasm 1.3.0"), None);
}

#[test]
fn nasm_is_found_on_path_and_an_old_one_is_not_taken() {
    let root = tempfile::tempdir().unwrap();
    let (new, old, empty) = (root.path().join("new"), root.path().join("old"), root.path().join("empty"));
    for dir in [&new, &old, &empty] {
        std::fs::create_dir(dir).unwrap();
    }
    fake_nasm(&new, "NASM version 2.16.01 compiled on Dec 23 2022");
    fake_nasm(&old, "NASM version 2.13.03");
    let path = |dirs: &[&Path]| std::env::join_paths(dirs).unwrap();
    assert_eq!(
        nasm::probe(None, Some(&path(&[&empty, &new]))),
        Probe::Found { program: new.join("nasm"), version: (2, 16) }
    );
    assert_eq!(
        nasm::probe(None, Some(&path(&[&old, &new]))),
        Probe::TooOld { program: old.join("nasm"), version: (2, 13) }
    );
    assert_eq!(nasm::probe(None, Some(&path(&[&empty]))), Probe::Missing);
    // $NASM wins over PATH.
    assert_eq!(
        nasm::probe(Some(&new.join("nasm")), Some(&path(&[&old]))),
        Probe::Found { program: new.join("nasm"), version: (2, 16) }
    );
}

#[test]
fn a_build_without_nasm_names_the_install_command_and_the_opt_out() {
    let message = nasm::missing_message(&Probe::Missing);
    for needed in
        ["apt install nasm", "brew install nasm", "conda install -c conda-forge nasm", "--no-default-features", "7x"]
    {
        assert!(message.contains(needed), "{needed} missing from:\n{message}");
    }
    let old = nasm::missing_message(&Probe::TooOld { program: "/usr/bin/nasm".into(), version: (2, 13) });
    assert!(old.contains("/usr/bin/nasm is NASM 2.13, older than 2.14"), "{old}");
}
