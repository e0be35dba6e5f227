//! The node-local block cache: every remote object a reader touches is kept
//! as a sparse file of its own size beside a map of which 4 MiB blocks are
//! there.
//!
//! ```text
//! <cache dir>/blocks-4MiB/<store>/<key>~<version>.data    the object's bytes, sparse
//! <cache dir>/blocks-4MiB/<store>/<key>~<version>.blocks  one byte per block: 1 once its bytes are written,
//!                                                          then per block the CRC32C of its bytes (4 bytes, LE)
//! ```
//!
//! A block read from the cache for the first time in a process is checked
//! against its CRC32C ([`CachedObject::check`]): bytes damaged on the disk
//! after they were written (or a checksum never written: a crash between
//! the two, a map written by an older robocache) mark the block missing, and
//! it is fetched again. A process trusts the blocks it fetched itself.
//!
//! `<version>` is a CRC32C of the URL, size and ETag, so an object replaced
//! on the server gets new files. Many processes of a node share the
//! directory: a block's bytes are written (`pwrite`) and made durable
//! (`fdatasync`) before its marker byte, and a reader reads a block only
//! after seeing its marker.
//!
//! Each block is fetched once per node. Before fetching block `b`, a reader
//! claims it ([`CachedObject::try_claim`]): inside the process, in a
//! `robocache_claims::ClaimMap` of blocks (the protocol the frame caches
//! share: waiters are woken when a claim is released); across processes, a write lock on byte `b` of the
//! `.blocks` file (an open-file-description lock, `F_OFD_SETLK`, so two
//! handles of one process exclude each other too; the kernel drops it when
//! its holder exits, so a process that dies mid-fetch leaves the block
//! unclaimed and unmarked, and the next reader fetches it). A reader that
//! finds a block claimed fetches its other blocks first, then waits for the
//! claim, taking claims in ascending block order (no two readers wait on
//! each other), and fetches the block only if its holder failed.
//! Over the byte budget, whole objects are removed, least recently opened
//! first (the map's modification time); a process that has them open keeps
//! reading its (unlinked) files. A process's own objects go last. An
//! eviction removes the data file, then the map; an open checks that both
//! files it holds are still the ones at their paths and opens them again
//! otherwise, so a map never vouches for a data file it was not written
//! with (and the per-block checksum would catch one that did).

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use robocache_claims::{ClaimMap, Claims, Found};

use crate::location::RemoteUrl;
use crate::{Error, Result};

/// Bytes of one cached block (one ranged request).
pub const BLOCK_BYTES: u64 = 4 << 20;
const LAYOUT_DIR: &str = "blocks-4MiB";
const UNKNOWN: u64 = u64::MAX;

/// The cache directory of one process (see the module docs).
#[derive(Debug)]
pub(crate) struct BlockCache {
    dir: PathBuf,
    budget: u64,
    /// Bytes on disk, as last counted plus what this process wrote since.
    used: AtomicU64,
    last_scan: Mutex<Option<Instant>>,
    /// `.data` files this process has open: never removed by its own eviction.
    open_here: Mutex<HashSet<PathBuf>>,
}

/// One object's files in the cache.
#[derive(Debug)]
pub(crate) struct CachedObject {
    pub data_path: PathBuf,
    data: File,
    markers: File,
    /// The object's size and its blocks.
    size: u64,
    blocks: u64,
    /// Per block: checked against its checksum (or fetched) in this process.
    checked: Vec<std::sync::atomic::AtomicBool>,
    /// Blocks a thread of this process is fetching (claimed, never held:
    /// the bytes are on disk).
    claims: ClaimMap<u64, ()>,
}

/// What [`CachedObject::try_claim`] found.
#[derive(Debug)]
pub(crate) enum Claim<'a> {
    /// The block is in the cache.
    Present,
    /// This caller fetches the block, then drops the claim.
    Mine(BlockClaim<'a>),
    /// Another thread or process is fetching it.
    Busy,
}

/// The right to fetch one block: released (in the process and the `.blocks`
/// file's lock) when dropped, fetched or not.
#[derive(Debug)]
pub(crate) struct BlockClaim<'a> {
    object: &'a CachedObject,
    pub block: u64,
    /// The claim inside the process, given up (waking the threads waiting
    /// for the block) after the file lock is released.
    _here: Claims<'a, u64, (), ()>,
}

fn io(file: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { file: file.to_path_buf(), source }
}

/// A path segment safe on every filesystem, kept readable.
fn segment(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '.' | '_' | '-' | '@' | '%' | '+' | '=' => c,
            _ => '_',
        })
        .collect()
}

impl BlockCache {
    pub fn new(dir: PathBuf, budget: u64) -> BlockCache {
        BlockCache {
            dir,
            budget,
            used: AtomicU64::new(UNKNOWN),
            last_scan: Mutex::new(None),
            open_here: Mutex::new(HashSet::new()),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The files of `url` (`size` bytes, `etag`), created when missing.
    pub fn object(&self, url: &RemoteUrl, size: u64, etag: Option<&str>) -> Result<CachedObject> {
        let (scheme, authority) = url.store.split_once("://").unwrap_or(("store", &url.store));
        let mut path = self.dir.join(LAYOUT_DIR).join(segment(scheme));
        for part in authority.split('/').chain(url.key.split('/')).filter(|p| !p.is_empty()) {
            path.push(segment(part));
        }
        let version = crc32c::crc32c(format!("{}\n{size}\n{}", url.url(), etag.unwrap_or("")).as_bytes());
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "object".into());
        let data_path = path.with_file_name(format!("{name}~{version:08x}.data"));
        let markers_path = path.with_file_name(format!("{name}~{version:08x}.blocks"));
        let parent = data_path.parent().unwrap_or(&self.dir).to_path_buf();
        std::fs::create_dir_all(&parent).map_err(io(&parent))?;
        let (data, markers) = open_pair(&data_path, &markers_path)?;
        let blocks = size.div_ceil(BLOCK_BYTES);
        // A new file is sized once; a file of another size was not written
        // by robocache's layout: start it again.
        if data.metadata().map_err(io(&data_path))?.len() != size {
            markers.set_len(0).map_err(io(&markers_path))?;
            data.set_len(size).map_err(io(&data_path))?;
        }
        // The markers, then the checksums. A map of another length (written
        // by an older robocache: markers only) is lengthened with zeros: its
        // blocks then fail their check and are fetched again.
        if markers.metadata().map_err(io(&markers_path))?.len() != blocks * 5 {
            markers.set_len(blocks * 5).map_err(io(&markers_path))?;
        }
        // Recently opened objects are evicted last.
        let _ = markers.set_modified(SystemTime::now());
        self.open_here.lock().unwrap_or_else(|e| e.into_inner()).insert(data_path.clone());
        let checked = (0..blocks).map(|_| std::sync::atomic::AtomicBool::new(false)).collect();
        Ok(CachedObject { data_path, data, markers, size, blocks, checked, claims: ClaimMap::default() })
    }

    /// Counts `bytes` newly written; over the budget, removes least recently
    /// opened objects (at most one directory scan a second).
    pub fn added(&self, bytes: u64) {
        let used = self.used.load(Ordering::Relaxed);
        let used = match used {
            UNKNOWN => self.scan_and_evict(),
            _ => self.used.fetch_add(bytes, Ordering::Relaxed) + bytes,
        };
        if used > self.budget {
            let mut last = self.last_scan.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
                *last = Some(Instant::now());
                drop(last);
                self.scan_and_evict();
            }
        }
    }

    /// Bytes the cache holds on disk (counted now).
    pub fn scan_and_evict(&self) -> u64 {
        let mut objects = Vec::new();
        let mut stack = vec![self.dir.join(LAYOUT_DIR)];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                let path = entry.path();
                let Ok(meta) = entry.metadata() else { continue };
                if meta.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "blocks") {
                    let data = path.with_extension("data");
                    let on_disk = std::fs::metadata(&data).map(|m| m.blocks() * 512).unwrap_or(0);
                    let used_at = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                    objects.push((used_at, data, path, on_disk));
                }
            }
        }
        let mut used: u64 = objects.iter().map(|o| o.3).sum();
        if used > self.budget {
            let target = self.budget - self.budget / 10;
            let open_here = self.open_here.lock().unwrap_or_else(|e| e.into_inner()).clone();
            // This process's own objects last: it is reading them.
            objects.sort_by_key(|o| (open_here.contains(&o.1), o.0));
            for (_, data, markers, on_disk) in objects {
                if used <= target {
                    break;
                }
                // Data first: a process that opens the object meanwhile
                // creates a new data file, and a new data file always
                // starts its map again, so no map ever vouches for bytes
                // of a file it was not written with.
                if std::fs::remove_file(&data).is_ok() {
                    let _ = std::fs::remove_file(&markers);
                    used = used.saturating_sub(on_disk);
                    tracing::debug!(file = %data.display(), bytes = on_disk, "evicted from the remote-data cache");
                }
            }
        }
        self.used.store(used, Ordering::Relaxed);
        used
    }
}

/// Opens (creating) an object's data file and map, both still linked at
/// their paths once both are open. Another process's eviction between the
/// two opens (it removes the data file, then the map) would otherwise pair
/// an unlinked data file with a new map, or a new data file with a map
/// about to be removed: the pair is opened again until it is one.
fn open_pair(data_path: &Path, markers_path: &Path) -> Result<(File, File)> {
    let open = |path: &Path| OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path);
    let mut attempts = 0;
    loop {
        let data = open(data_path).map_err(io(data_path))?;
        let markers = open(markers_path).map_err(io(markers_path))?;
        if is_linked(&data, data_path) && is_linked(&markers, markers_path) {
            return Ok((data, markers));
        }
        attempts += 1;
        if attempts == 100 {
            return Err(Error::Io {
                file: data_path.to_path_buf(),
                source: std::io::Error::other("removed by another process's eviction 100 times while being opened"),
            });
        }
    }
}

/// Whether `file` is the file at `path` (not unlinked or replaced since it was opened).
fn is_linked(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
        _ => false,
    }
}

impl CachedObject {
    /// The blocks in `blocks` whose bytes are not in the cache yet.
    pub fn missing(&self, blocks: std::ops::Range<u64>) -> Result<Vec<u64>> {
        let blocks = blocks.start.min(self.blocks)..blocks.end.min(self.blocks);
        let mut markers = vec![0u8; (blocks.end - blocks.start) as usize];
        // A map shorter than expected (another process restarting it) reads as "missing".
        let mut read = 0;
        while read < markers.len() {
            match self.markers.read_at(&mut markers[read..], blocks.start + read as u64) {
                Ok(0) => break,
                Ok(n) => read += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => return Err(Error::Io { file: self.data_path.with_extension("blocks"), source }),
            }
        }
        Ok(blocks.zip(markers).filter(|(_, m)| *m != 1).map(|(b, _)| b).collect())
    }

    fn markers_path(&self) -> PathBuf {
        self.data_path.with_extension("blocks")
    }

    fn is_present(&self, block: u64) -> Result<bool> {
        let mut marker = [0u8];
        match self.markers.read_at(&mut marker, block) {
            Ok(1) => Ok(marker[0] == 1),
            Ok(_) => Ok(false),
            Err(source) => Err(Error::Io { file: self.markers_path(), source }),
        }
    }

    /// Claims `block` for fetching unless it is present or another thread
    /// or process is fetching it (see the module docs).
    pub fn try_claim(&self, block: u64) -> Result<Claim<'_>> {
        let (_, here) = self.claims.find(&[block], |_| true);
        if here.is_empty() {
            return Ok(Claim::Busy); // another thread of this process fetches it
        }
        // `here` dropped on the way out gives the claim up.
        match block_lock(&self.markers, block, false) {
            Ok(true) => {}
            Ok(false) => return Ok(Claim::Busy),
            Err(source) => return Err(Error::Io { file: self.markers_path(), source }),
        }
        let claim = BlockClaim { object: self, block, _here: here };
        match self.is_present(block)? {
            true => Ok(Claim::Present),
            false => Ok(Claim::Mine(claim)),
        }
    }

    /// Waits until no other thread or process fetches `block`, then claims
    /// it; `None` when its bytes arrived meanwhile.
    pub fn claim_waiting(&self, block: u64) -> Result<Option<BlockClaim<'_>>> {
        let here = loop {
            let (mut found, here) = self.claims.find(&[block], |_| true);
            match found.pop() {
                Some(Found::Wait(waiter)) => {
                    self.claims.wait(&waiter);
                }
                _ => break here,
            }
        };
        if let Err(source) = block_lock(&self.markers, block, true) {
            return Err(Error::Io { file: self.markers_path(), source });
        }
        let claim = BlockClaim { object: self, block, _here: here };
        match self.is_present(block)? {
            true => Ok(None),
            false => Ok(Some(claim)),
        }
    }

    /// Writes block `block`'s bytes, makes them durable (`fdatasync`), then
    /// marks it present: a crash or power loss at any point leaves either no
    /// marker (the block is fetched again) or a marker over durable bytes,
    /// never a marker over a hole that reads as zeros.
    ///
    /// The block's CRC32C goes in before its marker. Both live in the map,
    /// written without a sync between them: a power loss may keep the marker
    /// and lose the checksum, and the block then fails its check and is
    /// fetched again, never read wrong.
    pub fn store(&self, block: u64, bytes: &[u8]) -> Result<()> {
        self.data.write_all_at(bytes, block * BLOCK_BYTES).map_err(io(&self.data_path))?;
        self.data.sync_data().map_err(io(&self.data_path))?;
        let crc = crc32c::crc32c(bytes).to_le_bytes();
        let map = |source| Error::Io { file: self.markers_path(), source };
        self.markers.write_all_at(&crc, self.blocks + 4 * block).map_err(map)?;
        self.markers.write_all_at(&[1], block).map_err(map)?;
        if let Some(checked) = self.checked.get(block as usize) {
            checked.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Checks the blocks of `blocks` not yet checked in this process (all
    /// present) against their checksums; marks the damaged ones missing
    /// and returns them, for the caller to fetch again.
    pub fn check(&self, blocks: std::ops::Range<u64>) -> Result<Vec<u64>> {
        let mut damaged = Vec::new();
        for block in blocks.start.min(self.blocks)..blocks.end.min(self.blocks) {
            let Some(checked) = self.checked.get(block as usize) else { continue };
            if checked.load(Ordering::Acquire) {
                continue;
            }
            let start = block * BLOCK_BYTES;
            let len = BLOCK_BYTES.min(self.size.saturating_sub(start)) as usize;
            let mut bytes = vec![0u8; len];
            self.data.read_exact_at(&mut bytes, start).map_err(io(&self.data_path))?;
            let mut stored = [0u8; 4];
            let map = |source| Error::Io { file: self.markers_path(), source };
            let whole = self.markers.read_at(&mut stored, self.blocks + 4 * block).map_err(map)? == 4;
            if whole && u32::from_le_bytes(stored) == crc32c::crc32c(&bytes) {
                checked.store(true, Ordering::Release);
                continue;
            }
            tracing::warn!(file = %self.data_path.display(), block, "a cached block fails its checksum: fetching it again");
            self.markers.write_all_at(&[0], block).map_err(map)?;
            damaged.push(block);
        }
        Ok(damaged)
    }

    /// Reads cached bytes (every block of the range must be present).
    pub fn read_exact_at(&self, buffer: &mut [u8], offset: u64) -> Result<()> {
        self.data.read_exact_at(buffer, offset).map_err(io(&self.data_path))
    }
}

impl Drop for BlockClaim<'_> {
    fn drop(&mut self) {
        if let Err(error) = block_unlock(&self.object.markers, self.block) {
            tracing::warn!(file = %self.object.markers_path().display(), block = self.block, %error, "releasing a block's lock");
        }
        // `_here` is dropped after this: the threads waiting are woken.
    }
}

/// The `fcntl` lock of byte `block` of the `.blocks` file: an
/// open-file-description lock on Linux (held per open file, dropped when
/// the file closes or its process exits), a process lock elsewhere.
fn block_range_lock(kind: libc::c_short, block: u64) -> libc::flock {
    // SAFETY: `flock` is a plain C struct; all-zero is a valid value
    // (l_pid must be 0 for open-file-description locks).
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = kind;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = block as libc::off_t;
    lock.l_len = 1;
    lock
}

#[cfg(target_os = "linux")]
const SET_LOCK: (libc::c_int, libc::c_int) = (libc::F_OFD_SETLK, libc::F_OFD_SETLKW);
#[cfg(not(target_os = "linux"))]
const SET_LOCK: (libc::c_int, libc::c_int) = (libc::F_SETLK, libc::F_SETLKW);

/// Takes the write lock of byte `block`: `Ok(false)` when another holds it
/// and `wait` is false.
fn block_lock(file: &File, block: u64, wait: bool) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let lock = block_range_lock(libc::F_WRLCK as libc::c_short, block);
    let command = if wait { SET_LOCK.1 } else { SET_LOCK.0 };
    loop {
        // SAFETY: a valid descriptor and a valid `flock` that outlives the call.
        if unsafe { libc::fcntl(file.as_raw_fd(), command, &lock) } == 0 {
            return Ok(true);
        }
        let error = std::io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN | libc::EACCES) if !wait => return Ok(false),
            _ => return Err(error),
        }
    }
}

fn block_unlock(file: &File, block: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let lock = block_range_lock(libc::F_UNLCK as libc::c_short, block);
    // SAFETY: as in `block_lock`.
    match unsafe { libc::fcntl(file.as_raw_fd(), SET_LOCK.0, &lock) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::location::Location;

    fn url(text: &str) -> RemoteUrl {
        match Location::parse(Path::new(text)).unwrap() {
            Location::Remote(url) => url,
            Location::Local(path) => panic!("{} read as local", path.display()),
        }
    }

    #[test]
    fn a_block_is_claimed_by_one_reader_of_a_node_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let url = url("s3://bucket/data/shard-0");
        let size = 3 * BLOCK_BYTES + 5;
        // Two caches over one directory: two processes of a node (each
        // opens its own files, as separate processes do).
        let (first, second) =
            (BlockCache::new(dir.path().into(), 1 << 40), BlockCache::new(dir.path().into(), 1 << 40));
        let (a, b) = (first.object(&url, size, Some("e1")).unwrap(), second.object(&url, size, Some("e1")).unwrap());
        assert_eq!(a.missing(0..4).unwrap(), vec![0, 1, 2, 3]);
        let Claim::Mine(claim) = a.try_claim(1).unwrap() else { panic!("an unclaimed block is not claimable") };
        // Held by the other process, and by this process's other threads.
        assert!(matches!(b.try_claim(1).unwrap(), Claim::Busy));
        assert!(matches!(a.try_claim(1).unwrap(), Claim::Busy));
        assert!(matches!(b.try_claim(2).unwrap(), Claim::Mine(_)));
        // The holder stores the block; a reader waiting for it finds it present.
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| b.claim_waiting(1).unwrap().is_none());
            std::thread::sleep(Duration::from_millis(50));
            a.store(1, &vec![7u8; BLOCK_BYTES as usize]).unwrap();
            drop(claim);
            assert!(waiter.join().unwrap(), "the waiting reader did not see the stored block");
        });
        assert!(matches!(b.try_claim(1).unwrap(), Claim::Present));
        // A holder that gives up without storing leaves the block to the waiter.
        let Claim::Mine(claim) = b.try_claim(3).unwrap() else { panic!() };
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| a.claim_waiting(3).unwrap().map(|c| c.block));
            std::thread::sleep(Duration::from_millis(50));
            drop(claim);
            assert_eq!(waiter.join().unwrap(), Some(3));
        });
        let mut byte = [0u8];
        b.read_exact_at(&mut byte, BLOCK_BYTES + 9).unwrap();
        assert_eq!(byte, [7]);
        assert_eq!(a.missing(0..4).unwrap(), vec![0, 2, 3]);
    }

    #[test]
    fn a_damaged_block_fails_its_check_and_is_missing_again() {
        let dir = tempfile::tempdir().unwrap();
        let url = url("s3://bucket/data/shard-1");
        let size = 2 * BLOCK_BYTES + 100;
        let cache = BlockCache::new(dir.path().into(), 1 << 40);
        let writer = cache.object(&url, size, Some("e1")).unwrap();
        for block in 0..3 {
            let len = if block == 2 { 100 } else { BLOCK_BYTES as usize };
            writer.store(block, &vec![block as u8 + 1; len]).unwrap();
        }
        assert!(writer.check(0..3).unwrap().is_empty(), "the blocks it wrote itself");
        // Another process, after a byte of block 1 and one of the last,
        // partial block went bad on the disk.
        let data = OpenOptions::new().write(true).open(&writer.data_path).unwrap();
        data.write_all_at(&[0xee], BLOCK_BYTES + 17).unwrap();
        data.write_all_at(&[0xee], 2 * BLOCK_BYTES + 99).unwrap();
        let reader = BlockCache::new(dir.path().into(), 1 << 40).object(&url, size, Some("e1")).unwrap();
        assert!(reader.missing(0..3).unwrap().is_empty());
        assert_eq!(reader.check(0..3).unwrap(), [1, 2]);
        assert_eq!(reader.missing(0..3).unwrap(), [1, 2], "damaged blocks are fetched again");
        assert!(reader.check(0..1).unwrap().is_empty(), "checked once per process");
        // A map without checksums (an older robocache's) checks nothing as good.
        let markers = writer.data_path.with_extension("blocks");
        OpenOptions::new().write(true).open(&markers).unwrap().set_len(3).unwrap();
        let old = BlockCache::new(dir.path().into(), 1 << 40).object(&url, size, Some("e1")).unwrap();
        assert_eq!(old.check(0..1).unwrap(), [0]);
    }

    #[test]
    fn a_pair_removed_between_its_opens_is_not_linked() {
        let dir = tempfile::tempdir().unwrap();
        let (data_path, markers_path) = (dir.path().join("o.data"), dir.path().join("o.blocks"));
        let (data, markers) = open_pair(&data_path, &markers_path).unwrap();
        assert!(is_linked(&data, &data_path) && is_linked(&markers, &markers_path));
        // Another process evicts the object (data first, then the map) and
        // a third opens it again: the first's handles are no longer the files.
        std::fs::remove_file(&data_path).unwrap();
        assert!(!is_linked(&data, &data_path), "a removed data file still counts as linked");
        std::fs::remove_file(&markers_path).unwrap();
        let (new_data, new_markers) = open_pair(&data_path, &markers_path).unwrap();
        assert!(!is_linked(&data, &data_path) && !is_linked(&markers, &markers_path));
        assert!(is_linked(&new_data, &data_path) && is_linked(&new_markers, &markers_path));
    }

    /// Processes of a node (caches with their own handles, on threads)
    /// reading, fetching and evicting a few objects at once under a budget
    /// smaller than the objects: every byte read is the object's.
    #[test]
    fn concurrent_readers_and_evictions_never_read_another_files_bytes() {
        const OBJECTS: u8 = 6;
        const SIZE: u64 = 64 << 10;
        let dir = tempfile::tempdir().unwrap();
        let urls: Vec<RemoteUrl> = (0..OBJECTS).map(|i| url(&format!("s3://bucket/shard-{i}"))).collect();
        // The object's bytes: every byte different from every other object's.
        let bytes_of =
            |object: u8| -> Vec<u8> { (0..SIZE).map(|i| (i as u8).wrapping_mul(31) ^ (object * 40)).collect() };
        let failures = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for process in 0..4u8 {
                let (dir, urls, failures) = (dir.path(), &urls, &failures);
                scope.spawn(move || {
                    let cache = BlockCache::new(dir.into(), 3 * SIZE);
                    for step in 0..150u32 {
                        let object = ((step * 7 + u32::from(process) * 3) % u32::from(OBJECTS)) as u8;
                        let expected = bytes_of(object);
                        let cached = cache.object(&urls[object as usize], SIZE, Some("v1")).unwrap();
                        let _ = cached.check(0..1).unwrap();
                        if !cached.missing(0..1).unwrap().is_empty() {
                            let claim = match cached.try_claim(0).unwrap() {
                                Claim::Mine(claim) => Some(claim),
                                Claim::Present => None,
                                Claim::Busy => cached.claim_waiting(0).unwrap(),
                            };
                            if claim.is_some() {
                                cached.store(0, &expected).unwrap();
                                cache.added(SIZE);
                            }
                        }
                        let _ = cached.check(0..1).unwrap();
                        if cached.missing(0..1).unwrap().is_empty() {
                            let mut read = vec![0u8; SIZE as usize];
                            cached.read_exact_at(&mut read, 0).unwrap();
                            if read != expected {
                                failures.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        if step % 5 == 0 {
                            cache.scan_and_evict();
                        }
                    }
                });
            }
        });
        assert_eq!(failures.load(Ordering::Relaxed), 0, "reads served bytes that are not the object's");
    }
}
