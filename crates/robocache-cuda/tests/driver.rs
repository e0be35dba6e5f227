//! The wrapper against a real driver: buffers, pinned memory, async copies,
//! events, errors. Without a usable driver (the stub libcuda in CI) every
//! test skips with the reason.
#![cfg(feature = "driver")]
#![allow(clippy::print_stderr)]

use robocache_cuda::{CudaContext, Error};

/// GPU 0's context; without a driver the test skips, unless
/// `ROBOCACHE_REQUIRE_CUDA=1` (the GPU bundle's run.sh sets it), where a
/// missing device fails it.
fn context() -> Option<CudaContext> {
    match CudaContext::new(0) {
        Ok(context) => Some(context),
        Err(reason) => {
            let required = std::env::var("ROBOCACHE_REQUIRE_CUDA").is_ok_and(|v| v == "1");
            assert!(!required, "ROBOCACHE_REQUIRE_CUDA=1 but no CUDA device: {reason}");
            eprintln!("skipping: {reason}");
            None
        }
    }
}

#[test]
fn no_device_is_a_clear_error() {
    match CudaContext::new(4096) {
        Err(Error::NoDevice { ordinal: 4096, .. } | Error::DriverUnavailable(_)) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn synchronous_round_trip_and_ranges() {
    let Some(context) = context() else { return };
    let data: Vec<u8> = (0..1000).map(|i| (i % 256) as u8).collect();
    let buffer = context.upload(&data).unwrap();
    let mut back = vec![0u8; 1000];
    context.download(&buffer, &mut back).unwrap();
    assert_eq!(back, data);
    let mut part = [0u8; 10];
    context.download_range(&buffer, 990, &mut part).unwrap();
    assert_eq!(&part, &data[990..]);
    assert!(matches!(context.download_range(&buffer, 995, &mut part), Err(Error::SizeMismatch { .. })));
    let copy = buffer.duplicate().unwrap();
    drop(buffer);
    context.download(&copy, &mut back).unwrap();
    assert_eq!(back, data);
    let mut filled = context.alloc(64).unwrap();
    context.fill(&mut filled, 7).unwrap();
    let mut sevens = [0u8; 64];
    context.download(&filled, &mut sevens).unwrap();
    assert_eq!(sevens, [7; 64]);
    context.fill_range(&mut filled, 8, 16, 1).unwrap();
    context.download(&filled, &mut sevens).unwrap();
    assert_eq!((sevens[7], sevens[8], sevens[23], sevens[24]), (7, 1, 1, 7));
    assert!(matches!(context.fill_range(&mut filled, 60, 8, 0), Err(Error::SizeMismatch { .. })));
    context.upload_into(&mut filled, 40, &[9, 8, 7]).unwrap();
    context.download(&filled, &mut sevens).unwrap();
    assert_eq!((sevens[39], sevens[40], sevens[41], sevens[42], sevens[43]), (7, 9, 8, 7, 7));
    assert!(matches!(context.upload_into(&mut filled, 62, &[1, 2, 3]), Err(Error::SizeMismatch { .. })));
}

#[test]
fn pinned_async_round_trip_timed_by_events() {
    let Some(context) = context() else { return };
    let len = 64 << 20;
    let mut pinned = context.pinned(len).unwrap();
    for (i, b) in pinned.as_mut_slice().iter_mut().enumerate() {
        *b = (i * 7 % 251) as u8;
    }
    let mut device = context.alloc(len).unwrap();
    let mut back = context.pinned(len).unwrap();
    let start = context.record_event().unwrap();
    // SAFETY: neither pinned buffer is touched until synchronize() below.
    unsafe {
        context.upload_async(&pinned, &mut device).unwrap();
        context.download_async(&device, &mut back).unwrap();
    }
    let end = context.record_event().unwrap();
    let ms = end.elapsed_ms_since(&start).unwrap();
    context.synchronize().unwrap();
    assert_eq!(back.as_slice(), pinned.as_slice());
    eprintln!(
        "64 MiB there and back through pinned memory: {ms:.3} ms ({:.1} GB/s)",
        2.0 * len as f64 / ms as f64 / 1e6
    );
    let mut short = context.alloc(len - 1).unwrap();
    // SAFETY: the call fails before queueing anything.
    assert!(matches!(unsafe { context.upload_async(&pinned, &mut short) }, Err(Error::SizeMismatch { .. })));
}

#[test]
fn copy_stream_upload_is_ordered_with_the_stream() {
    let Some(context) = context() else { return };
    let len = 16 << 20;
    let mut pinned = context.pinned(len + 64).unwrap();
    for (i, b) in pinned.as_mut_slice().iter_mut().enumerate() {
        *b = (i * 13 % 241) as u8;
    }
    // Allocated on the stream, filled on the copy stream, then copied on the
    // stream again: the download must see the upload.
    let mut device = context.alloc(len).unwrap();
    // SAFETY: `pinned` is not touched until the event has completed.
    let copied = unsafe { context.upload_on_copy_stream(&pinned, &mut device) }.unwrap();
    let twin = device.duplicate().unwrap();
    let mut back = vec![0u8; len];
    context.download(&twin, &mut back).unwrap();
    copied.wait().unwrap();
    assert!(copied.is_complete().unwrap());
    assert_eq!(back, pinned.as_slice()[..len]);
    let mut long = context.alloc(len + 65).unwrap();
    // SAFETY: the call fails before queueing anything.
    assert!(matches!(unsafe { context.upload_on_copy_stream(&pinned, &mut long) }, Err(Error::SizeMismatch { .. })));
}

#[test]
fn the_pool_keeps_freed_memory_once_asked_and_never_less() {
    let Some(context) = context() else { return };
    let before = context.pool_memory_kept().unwrap();
    let asked = before.max(1 << 30) + (64 << 20);
    context.keep_pool_memory(asked).unwrap();
    assert_eq!(context.pool_memory_kept().unwrap(), asked);
    context.keep_pool_memory(1 << 20).unwrap();
    assert_eq!(context.pool_memory_kept().unwrap(), asked, "a smaller request leaves the threshold as it is");
    // Memory freed past a synchronisation stays in the pool (it is not
    // handed back to the driver), and the next allocation reuses it.
    let first = context.alloc(256 << 20).unwrap();
    drop(first);
    context.synchronize().unwrap();
    let kept = context.pool_memory_reserved().unwrap();
    assert!(kept >= 256 << 20, "the pool handed freed memory back: {kept} bytes reserved after the free");
    let again = context.alloc(256 << 20).unwrap();
    assert_eq!(context.pool_memory_reserved().unwrap(), kept, "the second allocation mapped new memory");
    drop(again);
    context.synchronize().unwrap();
    assert!(context.pool_memory_reserved().unwrap() >= 256 << 20);
}

#[test]
fn out_of_memory_is_reported() {
    let Some(context) = context() else { return };
    if std::env::var_os("ROBOCACHE_UNDER_SANITIZER").is_some() {
        // memcheck reports the failing allocation this test makes on purpose.
        eprintln!("skipping the deliberate out-of-memory case under compute-sanitizer");
        return;
    }
    match context.alloc(1 << 50) {
        Err(Error::OutOfMemory { bytes }) => assert_eq!(bytes, 1 << 50),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_handle_on_another_stream_queues_there() {
    let Some(context) = context() else { return };
    let side = cust::stream::Stream::new(cust::stream::StreamFlags::NON_BLOCKING, None).unwrap();
    // SAFETY: `side` outlives the handle and every allocation made through it
    // (they are dropped, and the stream synchronised, before it).
    let handle = unsafe { context.on_external_stream(side.as_inner() as u64) };
    assert_eq!(handle.stream_handle(), side.as_inner() as u64);
    assert_ne!(handle.stream_handle(), context.stream_handle());
    assert!(handle == context, "the same context, whatever the stream");
    let data: Vec<u8> = (0..4096).map(|i| (i * 7 % 256) as u8).collect();
    let mut buffer = handle.upload(&data).unwrap();
    handle.fill_range(&mut buffer, 0, 16, 3).unwrap();
    let copy = buffer.duplicate().unwrap();
    let start = handle.record_event().unwrap();
    let mut back = vec![0u8; 4096];
    handle.download(&copy, &mut back).unwrap();
    assert_eq!(&back[..16], &[3; 16]);
    assert_eq!(&back[16..], &data[16..]);
    let end = handle.record_event().unwrap();
    assert!(end.elapsed_ms_since(&start).unwrap() >= 0.0);
    assert!(end.is_complete().unwrap());
    // The context's own stream and the handle's are ordered by events.
    handle.wait_for_external_stream(context.stream_handle()).unwrap();
    handle.make_external_stream_wait(context.stream_handle()).unwrap();
    drop((buffer, copy));
    handle.synchronize().unwrap();
    context.synchronize().unwrap();
}
