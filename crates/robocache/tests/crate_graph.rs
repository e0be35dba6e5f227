//! The crates depend on each other one way, as docs/architecture.md ("Rooms
//! and what each may import") lays them out: this test reads the
//! `[dependencies]` of every crate's `Cargo.toml` (dev-dependencies are
//! the tests' own and left out) and fails on an edge the table does not
//! allow, or on a crate the table does not know.

use std::collections::BTreeMap;
use std::path::Path;

/// Each crate and the robocache crates it may depend on.
const ROOMS: [(&str, &[&str]); 17] = [
    ("robocache-kernels", &[]),
    ("robocache-claims", &[]),
    ("robocache-cpu", &[]),
    // Augmentation's operations and draws: torchvision's arithmetic, no device.
    ("robocache-augment", &[]),
    ("robocache-storage", &["robocache-claims"]),
    ("robocache-video", &["robocache-claims"]),
    ("robocache-cuda", &["robocache-kernels"]),
    // The data-source core names no format; each format family sees only
    // the core (and the lower rooms); the registry sees them all.
    ("robocache-datasource", &["robocache-cpu", "robocache-storage", "robocache-video"]),
    ("robocache-datasource-hdf5", &["robocache-cpu", "robocache-datasource", "robocache-storage"]),
    ("robocache-datasource-rlds", &["robocache-cpu", "robocache-datasource", "robocache-storage"]),
    (
        "robocache-datasource-lerobot",
        &["robocache-cpu", "robocache-datasource", "robocache-storage", "robocache-video"],
    ),
    ("robocache-datasource-ros2", &["robocache-cpu", "robocache-datasource", "robocache-storage", "robocache-video"]),
    ("robocache-datasource-zarr", &["robocache-cpu", "robocache-datasource", "robocache-storage"]),
    (
        "robocache-datasets",
        &[
            "robocache-datasource",
            "robocache-datasource-hdf5",
            "robocache-datasource-lerobot",
            "robocache-datasource-rlds",
            "robocache-datasource-ros2",
            "robocache-datasource-zarr",
            "robocache-storage",
            "robocache-video",
        ],
    ),
    (
        "robocache",
        &[
            "robocache-augment",
            "robocache-cpu",
            "robocache-claims",
            "robocache-cuda",
            "robocache-datasets",
            "robocache-video",
        ],
    ),
    ("robocache-cli", &["robocache"]),
    ("robocache-python", &["robocache", "robocache-cpu"]),
];

/// The robocache crates named in the `[dependencies]` table of `manifest`.
fn robocache_dependencies(manifest: &str) -> Vec<String> {
    let mut inside = false;
    let mut found = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == "[dependencies]";
            continue;
        }
        let name = line.split(['.', '=', ' ']).next().unwrap_or_default();
        if inside && (name == "robocache" || name.starts_with("robocache-")) {
            found.push(name.to_owned());
        }
    }
    found
}

#[test]
fn no_crate_depends_on_one_above_it() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let rooms: BTreeMap<&str, &[&str]> = ROOMS.into_iter().collect();
    let mut seen = 0;
    let mut wrong = Vec::new();
    for entry in std::fs::read_dir(&crates).expect("crates/ readable") {
        let manifest = entry.expect("entry").path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else { continue };
        let Some(name) = text.lines().find_map(|l| l.trim().strip_prefix("name = ")).map(|n| n.trim_matches('"'))
        else {
            continue;
        };
        seen += 1;
        let Some(allowed) = rooms.get(name) else {
            wrong.push(format!("{name}: a crate docs/architecture.md's table of rooms does not list"));
            continue;
        };
        for dependency in robocache_dependencies(&text) {
            if !allowed.contains(&dependency.as_str()) {
                wrong.push(format!("{name} depends on {dependency}, which its room may not import"));
            }
        }
    }
    assert_eq!(seen, ROOMS.len(), "every crate of the table has a manifest under crates/");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_manifest_reader_finds_dependencies_only() {
    let manifest = "[package]\nname = \"x\"\n\n[dependencies]\nrobocache-cpu.workspace = true\nrobocache = { workspace = true }\nserde = \"1\"\n\n[dev-dependencies]\nrobocache-video.workspace = true\n";
    assert_eq!(robocache_dependencies(manifest), ["robocache-cpu", "robocache"]);
}
