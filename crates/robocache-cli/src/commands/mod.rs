//! One module per subcommand.

pub mod augment_preview;
pub mod bench;
pub mod convert;
pub mod demo;
pub mod index;
pub mod info;
pub mod inspect;
pub mod remote;
pub mod resample;
pub mod voxelize;

use std::path::{Path, PathBuf};

/// The device a `--backend` value (auto, cpu, cuda, cuda:N) asks for.
pub fn open_device(backend: &str) -> anyhow::Result<robocache::Device> {
    let request: robocache::BackendRequest = backend.parse().map_err(anyhow::Error::msg)?;
    Ok(robocache::Device::from_request(request)?)
}

/// Writes `text` to stdout; a closed pipe (`robocache inspect ... | head`) is not an error.
pub fn print_out(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// `out.npy` → `out.<suffix>.npy`, beside it.
pub fn sibling(output: &Path, suffix: &str) -> PathBuf {
    let stem = output.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    output.with_file_name(format!("{stem}.{suffix}.npy"))
}

/// Parses `a,b,c` (or one value for all three axes).
pub fn triple<T: std::str::FromStr + Copy>(text: &str) -> Result<[T; 3], String> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let parse = |s: &str| s.parse::<T>().map_err(|_| format!("'{s}' is not a valid number"));
    match parts.as_slice() {
        [one] => Ok([parse(one)?; 3]),
        [x, y, z] => Ok([parse(x)?, parse(y)?, parse(z)?]),
        _ => Err(format!("'{text}' should be one value or three separated by commas")),
    }
}
