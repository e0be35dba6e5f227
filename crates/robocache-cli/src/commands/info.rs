use anyhow::Result;
use robocache::Device;
use serde::Serialize;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct Info {
    version: &'static str,
    backends: Vec<Backend>,
    ptx_archs: Vec<&'static str>,
    auto: String,
    /// Per codec, the decoders of this build and whether each has its SIMD code.
    build: robocache::BuildInfo,
}

#[derive(Debug, Serialize)]
struct Backend {
    name: &'static str,
    compiled: bool,
    available: bool,
    detail: String,
}

pub fn run(args: Args) -> Result<()> {
    let cuda = match Device::cuda(0) {
        Ok(device) => Backend { name: "cuda", compiled: true, available: true, detail: device.to_string() },
        Err(reason) => {
            Backend { name: "cuda", compiled: Device::cuda_compiled(), available: false, detail: reason.to_string() }
        }
    };
    let cpu = Backend { name: "cpu", compiled: true, available: true, detail: Device::cpu().to_string() };
    let auto = if cuda.available { "cuda" } else { "cpu" }.to_owned();
    let info = Info {
        version: env!("CARGO_PKG_VERSION"),
        backends: vec![cpu, cuda],
        ptx_archs: robocache::ptx_archs(),
        auto,
        build: robocache::build_info(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&info)?);
        return Ok(());
    }
    println!("robocache {}", info.version);
    for backend in &info.backends {
        let state = match (backend.compiled, backend.available) {
            (true, true) => "available",
            (true, false) => "compiled, unavailable",
            (false, _) => "not compiled",
        };
        println!("  {:<5} {state}: {}", backend.name, backend.detail);
    }
    if !info.ptx_archs.is_empty() {
        println!("  PTX archs: {}", info.ptx_archs.join(", "));
    }
    println!("  auto picks: {}", info.auto);
    println!("  video decoders:");
    for (codec, decoders) in &info.build.video_decoders {
        let list: Vec<String> = decoders
            .iter()
            .map(|d| match d.assembly {
                Some(true) => format!("{} ({}, with its assembly)", d.decoder, d.device),
                Some(false) => format!("{} ({}, WITHOUT its assembly: several times slower)", d.decoder, d.device),
                None if d.device == "cpu" => format!("{} (cpu, no SIMD code for this CPU)", d.decoder),
                None => format!("{} ({}, where the driver has it)", d.decoder, d.device),
            })
            .collect();
        println!("    {codec:<5} {}", list.join(", "));
    }
    Ok(())
}
