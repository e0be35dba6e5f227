//! Datasets read where they live: the RLDS, LeRobot and robomimic fixtures
//! served by real servers that the tests start (nginx over HTTP, nginx laid
//! out as the Hugging Face Hub, moto's S3 server), read remote and compared
//! with the same fixture read local, stream for stream and row for row; a
//! proxy that drops connections, answers 500 and cuts bodies short in
//! front of them; and the errors of missing objects and dead servers.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use robocache_datasets::{Dataset, DeltaTimestamps, DeltaWindows, OpenOptions, Sampler, Shard, StorageOptions};
use support::servers::{self, Fault};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn options(cache: &Path, store: Vec<(String, String)>) -> OpenOptions {
    OpenOptions {
        rate_hz: None,
        storage: StorageOptions { cache_dir: Some(cache.to_path_buf()), cache_bytes: None, options: store },
        ..Default::default()
    }
}

fn rlds_options(cache: &Path, store: Vec<(String, String)>) -> OpenOptions {
    OpenOptions { rate_hz: Some(10.0), ..options(cache, store) }
}

/// Every stream of every episode, read whole, with the episode model.
/// Streams that fail give their error text, which must be the same too.
fn contents(dataset: &Dataset) -> Vec<(String, String, Result<Vec<u8>, String>)> {
    let mut out = Vec::new();
    for (e, episode) in dataset.info().episodes.iter().enumerate() {
        for stream in &episode.streams {
            let read = dataset
                .read_rows(e, &stream.name, 0..stream.len)
                .map(|v| v.as_slice().as_bytes().to_vec())
                .map_err(|err| err.to_string().rsplit(": ").next().unwrap_or_default().to_owned());
            out.push((episode.name.clone(), format!("{} {:?} {}", stream.name, stream.step_shape, stream.len), read));
        }
    }
    out
}

fn assert_same(local: &Dataset, remote: &Dataset, what: &str) {
    assert_eq!(local.format(), remote.format(), "{what}");
    assert_eq!(local.len(), remote.len(), "{what}: episodes");
    let (a, b) = (contents(local), contents(remote));
    assert_eq!(a.len(), b.len(), "{what}: streams");
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.0, y.0, "{what}");
        assert_eq!(x.1, y.1, "{what}: episode {}", x.0);
        if x.2 != y.2 {
            let show = |r: &Result<Vec<u8>, String>| match r {
                Ok(bytes) => format!("{} bytes {:?}", bytes.len(), &bytes[..bytes.len().min(16)]),
                Err(e) => e.clone(),
            };
            panic!("{what}: episode {} stream {}: remote {} != local {}", x.0, x.1, show(&y.2), show(&x.2));
        }
    }
}

/// A site with the fixtures: RLDS, LeRobot roots, a robomimic file, and the
/// LeRobot av1 and v21 roots laid out as the Hub serves them.
struct Site {
    dir: tempfile::TempDir,
    robomimic: PathBuf,
    _robomimic_dir: tempfile::TempDir,
}

fn site() -> Site {
    let dir = tempfile::tempdir().unwrap();
    let (robomimic_dir, robomimic) = support::fixture("robomimic", "lift.hdf5", &[]);
    let copy = |from: &Path, to: &str| {
        let output = std::process::Command::new("cp").arg("-r").arg(from).arg(dir.path().join(to)).output().unwrap();
        assert!(output.status.success());
    };
    copy(&fixtures().join("rlds"), "rlds");
    copy(&fixtures().join("lerobot"), "lerobot");
    std::fs::copy(&robomimic, dir.path().join("lift.hdf5")).unwrap();
    servers::hub_layout(dir.path(), "robocache/av1", "main", &fixtures().join("lerobot/av1"));
    servers::hub_layout(dir.path(), "robocache/v21", "v2.1", &fixtures().join("lerobot/v21"));
    Site { dir, robomimic, _robomimic_dir: robomimic_dir }
}

/// The site uploaded to moto's S3 server, bucket `robots`, under `data/`:
/// the site, the server (both kept alive by the caller) and the store options.
fn site_on_s3() -> (Site, servers::Server, Vec<(String, String)>) {
    let site = site();
    let moto = servers::moto();
    servers::upload(&moto, "robots", site.dir.path(), "data");
    let s3 = servers::s3_options(&moto);
    (site, moto, s3)
}

const RLDS: &str = "rlds/robocache_fixture_dict/1.0.0";
const LEROBOT_ROOTS: [&str; 5] = ["av1", "h264", "hevc", "images", "v21"];

#[test]
fn fixtures_read_over_http_equal_the_local_ones() {
    let site = site();
    let nginx = servers::nginx(site.dir.path());
    let cache = tempfile::tempdir().unwrap();
    let base = nginx.url();

    let local = Dataset::open_with(fixtures().join(RLDS), &rlds_options(cache.path(), vec![])).unwrap();
    let remote = Dataset::open_with(format!("{base}/{RLDS}"), &rlds_options(cache.path(), vec![])).unwrap();
    assert_eq!(remote.info().path, PathBuf::from(format!("{base}/{RLDS}")));
    assert_same(&local, &remote, "RLDS over HTTP");

    // Plain HTTP cannot list: the LeRobot episode files are found by name.
    for root in LEROBOT_ROOTS {
        let local = Dataset::open(fixtures().join("lerobot").join(root)).unwrap();
        let remote = Dataset::open_with(format!("{base}/lerobot/{root}"), &options(cache.path(), vec![])).unwrap();
        assert_same(&local, &remote, &format!("LeRobot {root} over HTTP"));
    }

    // HDF5 is fetched whole into the cache, then read as a local file.
    let local = Dataset::open(&site.robomimic).unwrap();
    let remote = Dataset::open_with(format!("{base}/lift.hdf5"), &options(cache.path(), vec![])).unwrap();
    assert_same(&local, &remote, "robomimic over HTTP");

    // A second dataset over the same cache reads no byte from the network.
    let again = Dataset::open_with(format!("{base}/lerobot/av1"), &options(cache.path(), vec![])).unwrap();
    let _ = contents(&again);
    let usage = again.storage().usage();
    assert_eq!(usage.bytes_fetched, 0, "{usage:?}");
    assert!(usage.bytes_from_cache > 0, "{usage:?}");
}

#[test]
fn lerobot_roots_read_from_the_hub_layout_equal_the_local_ones() {
    let site = site();
    let nginx = servers::nginx(site.dir.path());
    let cache = tempfile::tempdir().unwrap();
    let hub = vec![("hf_endpoint".to_owned(), nginx.url())];
    for (url, root) in [("hf://datasets/robocache/av1", "av1"), ("hf://datasets/robocache/v21@v2.1", "v21")] {
        let local = Dataset::open(fixtures().join("lerobot").join(root)).unwrap();
        let remote = Dataset::open_with(url, &options(cache.path(), hub.clone())).unwrap();
        assert_same(&local, &remote, url);
    }
    // A revision the Hub does not have is a clear error naming the URL.
    let err = Dataset::open_with("hf://datasets/robocache/av1@nope", &options(cache.path(), hub)).unwrap_err();
    assert!(err.to_string().contains("hf://datasets/robocache/av1@nope"), "{err}");
}

#[test]
fn fixtures_read_from_s3_equal_the_local_ones_and_the_second_pass_reads_no_network() {
    let site = site();
    let moto = servers::moto();
    servers::upload(&moto, "robots", site.dir.path(), "data");
    let cache = tempfile::tempdir().unwrap();
    let s3 = servers::s3_options(&moto);

    // Found by listing: the RLDS version folder, the LeRobot episode files.
    let local =
        Dataset::open_with(fixtures().join(RLDS).parent().unwrap(), &rlds_options(cache.path(), vec![])).unwrap();
    let remote =
        Dataset::open_with("s3://robots/data/rlds/robocache_fixture_dict", &rlds_options(cache.path(), s3.clone()))
            .unwrap();
    assert_same(&local, &remote, "RLDS from S3");
    for root in LEROBOT_ROOTS {
        let local = Dataset::open(fixtures().join("lerobot").join(root)).unwrap();
        let url = format!("s3://robots/data/lerobot/{root}");
        let remote = Dataset::open_with(&url, &options(cache.path(), s3.clone())).unwrap();
        assert_same(&local, &remote, &url);
        // The second epoch: no request at all.
        let before = remote.storage().usage();
        let _ = contents(&remote);
        let after = remote.storage().usage();
        assert_eq!((after.requests, after.bytes_fetched), (before.requests, before.bytes_fetched), "{url}");
    }
    let local = Dataset::open(&site.robomimic).unwrap();
    let remote = Dataset::open_with("s3://robots/data/lift.hdf5", &options(cache.path(), s3.clone())).unwrap();
    assert_same(&local, &remote, "robomimic from S3");

    // Without the cache every read fetches exactly its bytes, and HDF5 says why it cannot.
    let uncached = OpenOptions {
        storage: StorageOptions { cache_bytes: Some(0), options: s3.clone(), ..Default::default() },
        ..Default::default()
    };
    let local = Dataset::open(fixtures().join("lerobot/av1")).unwrap();
    let remote = Dataset::open_with("s3://robots/data/lerobot/av1", &uncached).unwrap();
    assert_same(&local, &remote, "LeRobot from S3 without cache");
    let err = Dataset::open_with("s3://robots/data/lift.hdf5", &uncached).unwrap_err().to_string();
    assert!(err.contains("s3://robots/data/lift.hdf5") && err.contains("cache"), "{err}");

    // The store alone (`robocache bench storage`): every byte below a prefix, once, past the cache.
    let storage = robocache_datasets::Storage::new(StorageOptions { options: s3.clone(), ..Default::default() });
    let prefix = fixtures().join("lerobot/av1");
    let files: Vec<PathBuf> = walk(&prefix);
    let size: u64 = files.iter().map(|f| std::fs::metadata(f).unwrap().len()).sum();
    let measured = storage.fetch_throughput(Path::new("s3://robots/data/lerobot/av1"), 4, None).unwrap();
    assert_eq!((measured.objects, measured.bytes), (files.len(), size));
    assert!(measured.bytes_per_second() > 0.0 && measured.requests >= files.len() as u64);
    let one = storage.fetch_throughput(Path::new("s3://robots/data/lift.hdf5"), 2, Some(1000)).unwrap();
    assert_eq!((one.objects, one.bytes), (1, 1000));
    let err = storage.fetch_throughput(&prefix, 2, None).unwrap_err().to_string();
    assert!(err.contains("local path"), "{err}");

    // Missing objects and unknown options are clear errors.
    let err = Dataset::open_with("s3://robots/data/nothing.hdf5", &options(cache.path(), s3.clone())).unwrap_err();
    assert!(err.to_string().contains("s3://robots/data/nothing.hdf5"), "{err}");
    let mut bad = s3.clone();
    bad.push(("aws_no_such_option".into(), "1".into()));
    let err = Dataset::open_with("s3://robots/data/lift.hdf5", &options(cache.path(), bad)).unwrap_err();
    assert!(err.to_string().contains("aws_no_such_option"), "{err}");
}

/// An RLDS split's sidecar index written into the bucket by one node: every
/// other node's first open fetches the builder's two JSON files and the
/// index, none of the shards, and reads the same dataset.
#[test]
fn with_its_index_in_the_bucket_a_remote_rlds_open_fetches_no_shard() {
    let (_site, _moto, s3) = site_on_s3();
    let url = "s3://robots/data/rlds/robocache_fixture_dict/1.0.0";
    let version = fixtures().join(RLDS);
    let shards: u64 = walk(&version)
        .iter()
        .filter(|p| p.to_string_lossy().contains("-train.tfrecord-"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    let open = |cache: &Path| Dataset::open_with(url, &rlds_options(cache, s3.clone())).unwrap();

    let first_node = tempfile::tempdir().unwrap();
    let indexing = open(first_node.path());
    assert!(indexing.storage().usage().bytes_fetched >= shards, "without an index opening reads every record");
    let written = indexing.write_index(None).unwrap();
    assert_eq!(written, Path::new(url).join("robocache-index.train.json"));

    let second_node = tempfile::tempdir().unwrap();
    let remote = open(second_node.path());
    let metadata: u64 = ["dataset_info.json", "features.json"]
        .iter()
        .map(|name| std::fs::metadata(version.join(name)).unwrap().len())
        .sum();
    let index = robocache_datasets::Storage::new(StorageOptions {
        cache_bytes: Some(0),
        options: s3.clone(),
        ..Default::default()
    })
    .read(&written)
    .unwrap();
    assert_eq!(remote.storage().usage().bytes_fetched, metadata + index.len() as u64, "the JSON files, no shard");
    let local = Dataset::open_with(&version, &rlds_options(second_node.path(), vec![])).unwrap();
    assert_same(&local, &remote, "RLDS from S3 through its index");
}

/// Two nodes (own caches), one rank each, sharded by episode over a LeRobot
/// v2.1 root (one parquet file per episode) in S3: each fetches the
/// metadata and its own episodes' files, never the other rank's.
#[test]
fn sharded_by_episode_each_node_fetches_only_its_episodes() {
    let (_site, _moto, s3) = site_on_s3();
    let url = "s3://robots/data/lerobot/v21";
    let root = fixtures().join("lerobot/v21");
    let file_of = |episode: usize| root.join(format!("data/chunk-000/episode_{episode:06}.parquet"));
    let spec = DeltaTimestamps::new(vec![("action".into(), vec![-0.1, 0.0, 0.1])]);

    // Reads every stream of the episodes the rank's epoch draws windows from.
    let read = |shard: Option<Shard>| {
        let cache = tempfile::tempdir().unwrap();
        let dataset = Dataset::open_with(url, &options(cache.path(), s3.clone())).unwrap();
        let opened = dataset.storage().usage().bytes_fetched;
        let windows = DeltaWindows::new(dataset.info(), &spec).unwrap();
        let episode_of: Vec<usize> = (0..windows.len()).map(|s| windows.window(s).unwrap().episode).collect();
        let sampler = match shard {
            Some(shard) => Sampler::by_episode(&episode_of, 1, shard).unwrap(),
            None => Sampler::new(windows.len(), 1, Shard::default()).unwrap(),
        };
        let mut episodes: Vec<usize> = sampler.epoch(0).iter().map(|&s| episode_of[s]).collect();
        episodes.sort_unstable();
        episodes.dedup();
        for &e in &episodes {
            for stream in &dataset.info().episodes[e].streams {
                dataset.read_rows(e, &stream.name, 0..stream.len).unwrap();
            }
        }
        (episodes, opened, dataset.storage().usage().bytes_fetched)
    };
    let (all, opened, everything) = read(None);
    assert_eq!(all, (0..5).collect::<Vec<_>>());
    let size = |episodes: &[usize]| episodes.iter().map(|&e| std::fs::metadata(file_of(e)).unwrap().len()).sum::<u64>();
    assert_eq!(everything - opened, size(&all), "a whole read fetches every episode file once, past the metadata");
    let mut owned = Vec::new();
    for rank in 0..2 {
        let (episodes, rank_opened, fetched) = read(Some(Shard::new(rank, 2).unwrap()));
        assert_eq!(rank_opened, opened, "opening fetches the metadata alone");
        assert_eq!(fetched - rank_opened, size(&episodes), "rank {rank} ({episodes:?}) fetches its episodes' files");
        owned.extend(episodes);
    }
    assert_eq!(owned, all, "the ranks' episodes partition the dataset");
}

#[test]
fn dropped_connections_server_errors_and_cut_bodies_are_retried_and_nothing_wrong_is_delivered() {
    let site = site();
    let nginx = servers::nginx(site.dir.path());
    let proxy = servers::faulty_proxy(
        nginx.port,
        vec![Fault::Pass, Fault::ServerError, Fault::Pass, Fault::Drop, Fault::Pass, Fault::Truncate],
    );
    // A fresh cache: every block is fetched through the proxy once.
    let cache = tempfile::tempdir().unwrap();
    let through =
        |store: Vec<(String, String)>, rate_hz: Option<f64>| OpenOptions { rate_hz, ..options(cache.path(), store) };
    let local = Dataset::open_with(fixtures().join(RLDS), &rlds_options(cache.path(), vec![])).unwrap();
    let remote = Dataset::open_with(format!("{}/{RLDS}", proxy.url()), &through(vec![], Some(10.0))).unwrap();
    assert_same(&local, &remote, "RLDS through the faulty proxy");
    let hub = vec![("hf_endpoint".to_owned(), proxy.url())];
    for (url, root) in [("hf://datasets/robocache/av1", "av1"), ("hf://datasets/robocache/v21@v2.1", "v21")] {
        let local = Dataset::open(fixtures().join("lerobot").join(root)).unwrap();
        let remote = Dataset::open_with(url, &through(hub.clone(), None)).unwrap();
        assert_same(&local, &remote, &format!("{url} through the faulty proxy"));
    }
    let local = Dataset::open(&site.robomimic).unwrap();
    let remote = Dataset::open_with(format!("{}/lift.hdf5", proxy.url()), &through(vec![], None)).unwrap();
    assert_same(&local, &remote, "robomimic through the faulty proxy");
    let faults = proxy.faults.load(std::sync::atomic::Ordering::SeqCst);
    assert!(faults >= 10, "the proxy broke only {faults} requests");

    // A server that always fails: reported, naming the URL, within the retry budget.
    let dead = servers::faulty_proxy(nginx.port, vec![Fault::ServerError]);
    let quick = vec![("max_retries".to_owned(), "2".to_owned()), ("retry_timeout".to_owned(), "5".to_owned())];
    let start = Instant::now();
    let err =
        Dataset::open_with(format!("{}/lift.hdf5", dead.url()), &options(tempfile::tempdir().unwrap().path(), quick))
            .unwrap_err()
            .to_string();
    assert!(err.contains(&format!("{}/lift.hdf5", dead.url())) && err.contains("500"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(20), "gave up after {:?}", start.elapsed());
    // Bodies cut on every other request, one retry: whatever is read is right.
    let cutting = servers::faulty_proxy(nginx.port, vec![Fault::Pass, Fault::Truncate]);
    let cache = tempfile::tempdir().unwrap();
    let quick = vec![("max_retries".to_owned(), "1".to_owned())];
    let local = contents(&local_rlds());
    if let Ok(remote) = Dataset::open_with(format!("{}/{RLDS}", cutting.url()), &rlds_options(cache.path(), quick)) {
        for (x, y) in local.iter().zip(&contents(&remote)) {
            if let Ok(bytes) = &y.2 {
                assert_eq!(Some(bytes), x.2.as_ref().ok(), "a read through a cutting proxy delivered wrong bytes");
            }
        }
    }
}

/// Every file below `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

fn local_rlds() -> Dataset {
    Dataset::open_with(fixtures().join(RLDS), &OpenOptions { rate_hz: Some(10.0), ..Default::default() }).unwrap()
}

#[test]
fn processes_sharing_a_cache_read_the_same_bytes_and_the_budget_is_kept() {
    let site = site();
    let nginx = servers::nginx(site.dir.path());
    let cache = tempfile::tempdir().unwrap();
    let url = format!("{}/lerobot/images", nginx.url());
    let local = Dataset::open(fixtures().join("lerobot/images")).unwrap();
    // What one reader alone fetches.
    let alone = tempfile::tempdir().unwrap();
    let remote = Dataset::open_with(&url, &options(alone.path(), vec![])).unwrap();
    assert_same(&local, &remote, "LeRobot images, one reader");
    let once = remote.storage().usage().bytes_fetched;
    assert!(once > 0);
    // Four storages over one cache directory (as four processes of a node),
    // reading at once: each block is fetched once, by one of them.
    let fetched: u64 = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    let remote = Dataset::open_with(&url, &options(cache.path(), vec![])).unwrap();
                    assert_same(&local, &remote, "LeRobot images, shared cache");
                    remote.storage().usage().bytes_fetched
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().unwrap()).sum()
    });
    assert_eq!(fetched, once, "four readers of one node fetched {fetched} bytes where one fetches {once}");
    // A budget smaller than the dataset: objects are evicted, reads stay right.
    let small = OpenOptions {
        storage: StorageOptions {
            cache_dir: Some(cache.path().to_path_buf()),
            cache_bytes: Some(64 << 10),
            options: vec![],
        },
        ..Default::default()
    };
    let remote = Dataset::open_with(format!("{}/lerobot/av1", nginx.url()), &small).unwrap();
    assert_same(&Dataset::open(fixtures().join("lerobot/av1")).unwrap(), &remote, "LeRobot av1, small cache");
    let mut on_disk = 0u64;
    let mut stack = vec![cache.path().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                on_disk += std::os::unix::fs::MetadataExt::blocks(&meta) * 512;
            }
        }
    }
    // Within the budget plus the objects this process still has open.
    assert!(on_disk < 1 << 20, "the cache holds {on_disk} bytes on disk with a 64 KiB budget");
}

/// An object replaced on the server after it was opened: its next ranged
/// read fails, naming the object, instead of mixing the two versions' bytes
/// (every ranged read sends the ETag read at open as `If-Match`), over S3
/// (moto) and over HTTP (nginx).
#[test]
fn an_object_replaced_after_it_was_opened_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("blob.bin");
    std::fs::write(&file, vec![1u8; 10_000]).unwrap();
    let uncached = |store: Vec<(String, String)>| {
        robocache_datasets::Storage::new(StorageOptions { cache_bytes: Some(0), options: store, ..Default::default() })
    };

    let moto = servers::moto();
    servers::upload(&moto, "robots", dir.path(), "v");
    let storage = uncached(servers::s3_options(&moto));
    let blob = storage.open(Path::new("s3://robots/v/blob.bin")).unwrap();
    let mut bytes = [0u8; 10];
    blob.read_exact_at(&mut bytes, 0).unwrap();
    assert_eq!(bytes, [1; 10]);
    std::fs::write(&file, vec![2u8; 10_000]).unwrap();
    servers::upload(&moto, "robots", dir.path(), "v");
    let err = blob.read_exact_at(&mut bytes, 100).unwrap_err().to_string();
    assert!(err.contains("s3://robots/v/blob.bin") && err.contains("changed on the server"), "{err}");
    // A new storage (a dataset opened again) reads the new version.
    let mut fresh = [0u8; 10];
    uncached(servers::s3_options(&moto))
        .open(Path::new("s3://robots/v/blob.bin"))
        .unwrap()
        .read_exact_at(&mut fresh, 100)
        .unwrap();
    assert_eq!(fresh, [2; 10]);

    let nginx = servers::nginx(dir.path());
    let url = format!("{}/blob.bin", nginx.url());
    let storage = uncached(vec![]);
    let blob = storage.open(Path::new(&url)).unwrap();
    blob.read_exact_at(&mut bytes, 0).unwrap();
    assert_eq!(bytes, [2; 10]);
    // nginx's ETag is the file's modification time and size.
    std::fs::write(&file, vec![3u8; 10_000]).unwrap();
    let later = std::time::SystemTime::now() + Duration::from_secs(5);
    std::fs::File::options().write(true).open(&file).unwrap().set_modified(later).unwrap();
    let err = blob.read_exact_at(&mut bytes, 100).unwrap_err().to_string();
    assert!(err.contains(&url) && err.contains("changed on the server"), "{err}");
}

/// Bytes of the node-local cache damaged on the disk: the next process to
/// read them checks each block against its checksum once, finds the
/// damaged one, fetches it again and reads the object's true bytes.
#[test]
fn a_cached_block_damaged_on_disk_is_fetched_again() {
    let dir = tempfile::tempdir().unwrap();
    let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
    std::fs::write(dir.path().join("blob.bin"), &bytes).unwrap();
    let moto = servers::moto();
    servers::upload(&moto, "robots", dir.path(), "v");
    let cache = tempfile::tempdir().unwrap();
    let storage = || {
        robocache_datasets::Storage::new(StorageOptions {
            cache_dir: Some(cache.path().to_path_buf()),
            options: servers::s3_options(&moto),
            ..Default::default()
        })
    };
    let url = Path::new("s3://robots/v/blob.bin");
    let first = storage();
    let mut read = vec![0u8; bytes.len()];
    first.open(url).unwrap().read_exact_at(&mut read, 0).unwrap();
    assert_eq!(read, bytes);
    let data = walk(cache.path()).into_iter().find(|p| p.extension().is_some_and(|e| e == "data")).unwrap();
    let mut damaged = std::fs::read(&data).unwrap();
    damaged[5_000] ^= 0xff;
    std::fs::write(&data, &damaged).unwrap();
    let second = storage();
    let mut again = vec![0u8; 16];
    second.open(url).unwrap().read_exact_at(&mut again, 4_990).unwrap();
    assert_eq!(again, bytes[4_990..5_006], "the damaged block was fetched again");
    assert!(second.usage().bytes_fetched > 0, "{:?}", second.usage());
    assert_eq!(std::fs::read(&data).unwrap(), bytes, "and the cache holds the true bytes again");
}

/// Zarr replay buffers (directory stores of formats 2 and 3, a `.zarr.zip`)
/// and ALOHA episode files from S3 equal the local ones: a directory
/// store's keys are objects read with ranged reads, a zip archive and an
/// HDF5 episode file are read through the block cache.
#[test]
fn zarr_stores_and_aloha_episodes_read_from_s3_equal_the_local_ones() {
    let dir = tempfile::tempdir().unwrap();
    let copy = |from: &Path, to: &str| {
        let output = std::process::Command::new("cp").arg("-r").arg(from).arg(dir.path().join(to)).output().unwrap();
        assert!(output.status.success());
    };
    copy(&fixtures().join("zarr"), "zarr");
    let aloha = dir.path().join("aloha");
    support::run_fixture_script("make_aloha_fixtures.py", &["real", aloha.to_str().unwrap(), "2", "5"]);
    let moto = servers::moto();
    servers::upload(&moto, "robots", dir.path(), "data");
    let cache = tempfile::tempdir().unwrap();
    let s3 = servers::s3_options(&moto);
    for store in ["zarr/pusht_v2.zarr", "zarr/pusht_v3.zarr", "zarr/umi_v2.zarr.zip"] {
        let local = Dataset::open(fixtures().join(store)).unwrap();
        let url = format!("s3://robots/data/{store}");
        let remote =
            Dataset::open_with(&url, &options(cache.path(), s3.clone())).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_same(&local, &remote, &url);
    }
    let local = Dataset::open(&aloha).unwrap();
    let remote = Dataset::open_with("s3://robots/data/aloha", &options(cache.path(), s3.clone())).unwrap();
    assert_same(&local, &remote, "ALOHA from S3");
}
