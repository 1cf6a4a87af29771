//! `ocisource version`: the client version as `flux version --client` prints it
//! (`ocisource: v1.2.3`), or as an object with `-o yaml|json`. Only what is known when
//! the binary is built: Cargo's package version and the target's OS and architecture.

use serde::Serialize;

use crate::cli::VersionArgs;

use super::AppError;

/// What `version -o yaml|json` prints, in kubectl's shape (`clientVersion`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Versions {
    client_version: ClientVersion,
}

/// This binary.
#[derive(Debug, Serialize)]
struct ClientVersion {
    /// `v` and Cargo's package version, as Flux tags its releases.
    version: String,
    /// Rust's name of the target OS (`linux`, `macos`, `windows`).
    os: &'static str,
    /// Rust's name of the target architecture (`x86_64`, `aarch64`).
    arch: &'static str,
}

/// Runs `version`.
pub fn run(args: VersionArgs) -> Result<(), AppError> {
    let client = ClientVersion {
        version: format!("v{}", env!("CARGO_PKG_VERSION")),
        os: std::env::consts::OS,
        arch: std::env::consts::ARCH,
    };
    match args.output {
        None => {
            println!("ocisource: {}", client.version);
            Ok(())
        }
        Some(format) => super::print(
            &Versions {
                client_version: client,
            },
            format,
        ),
    }
}
