//! The composition root: the ONLY place that names concrete adapters (the HTTP registry
//! connector, the cosign verifier, the cloud logins, the disk store, the Kubernetes
//! client). Each command builds what it needs from validated CLI settings and runs;
//! errors come back as [`AppError`] with the exit code a shell user can act on.

mod completion;
mod controller_cmd;
mod progress;
mod pull;
mod pull_target;
mod push;
mod push_source;
mod reconcile_cmd;
mod reference;
mod registry_args;
mod sign_cmd;
mod verify_cmd;
mod version;

use std::io::IsTerminal;
use std::process::ExitCode;

use crate::cli::{Cli, Command, LogEncoding};

/// What went wrong, and the exit code it maps to.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Bad flags, URL, spec or input file: exit 2.
    #[error("{0}")]
    Input(String),
    /// Signature verification failed: exit 3.
    #[error("{0}")]
    Verification(String),
    /// The operation failed (registry, storage, artifact content): exit 1.
    #[error("{0}")]
    Failed(String),
    /// One-shot reconcile finished, but not every object is Ready: exit 1, status printed.
    #[error("{0} of {1} objects are not Ready")]
    NotReady(usize, usize),
}

impl AppError {
    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Input(_) => 2,
            Self::Verification(_) => 3,
            Self::Failed(_) | Self::NotReady(..) => 1,
        }
    }
}

/// The cloud registry login (`spec.provider`) with the controller's environment; with
/// `service_accounts`, objects' ServiceAccounts log in too (object-level identity).
fn cloud_login(
    service_accounts: Option<std::sync::Arc<dyn crate::cloud::ServiceAccountTokens>>,
) -> Result<std::sync::Arc<crate::cloud::WorkloadLogin>, AppError> {
    let login = crate::cloud::WorkloadLogin::new(
        crate::cloud::CloudSettings::from_env(),
        std::sync::Arc::new(crate::cloud::SystemClock),
    )
    .map_err(|e| AppError::Failed(format!("failed to set up cloud registry logins: {e}")))?;
    Ok(std::sync::Arc::new(match service_accounts {
        Some(tokens) => login.with_object_identity(tokens),
        None => login,
    }))
}

/// Colour only for a person at a terminal: never in CI logs, files or pipes, and never
/// when `NO_COLOR` is set (no-color.org).
fn colour() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The TLS verifier logs every refused certificate at ERROR, and the registry error
/// carries the same text: unless asked for by name, its log is left out so that each
/// failure is printed once.
const QUIET_TARGETS: &str = "rustls_platform_verifier=off";

fn init_tracing(level: &str, encoding: LogEncoding) {
    let directives = if level.contains("rustls_platform_verifier") {
        level.to_string()
    } else {
        format!("{level},{QUIET_TARGETS}")
    };
    let filter = tracing_subscriber::EnvFilter::try_new(directives)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("warn,{QUIET_TARGETS}")));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour())
        .with_writer(progress::LogWriter);
    let _ = match encoding {
        LogEncoding::Json => builder.json().try_init(),
        LogEncoding::Console => builder.try_init(),
    };
}

/// Runs the parsed command line; prints the error chain once; returns the exit code.
pub fn main(cli: Cli) -> ExitCode {
    init_tracing(&cli.log_level, cli.log_encoding);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Pull(args) => pull::run(args).await,
            Command::Push(args) => push::run(args).await,
            Command::Verify(args) => verify_cmd::run(args).await,
            Command::Sign(args) => sign_cmd::run(args).await,
            Command::Reconcile(args) => reconcile_cmd::run(args).await,
            Command::Controller(args) => {
                args.feature_gates.log_inert();
                controller_cmd::run(args).await
            }
            Command::Crd => {
                print!("{}", crate::api::crds_yaml());
                Ok(())
            }
            Command::Rbac(args) => {
                let optional = crate::api::rbac::Optional {
                    object_level_identity: args.feature_gates.object_level_workload_identity,
                    flux_drop_in: args.flux_drop_in,
                };
                print!("{}", crate::api::rbac::rules_yaml(optional));
                Ok(())
            }
            Command::Version(args) => version::run(args),
            Command::Completion(args) => {
                completion::run(args);
                Ok(())
            }
        }
    });
    // Blocking tasks still running (a read stuck in the kernel) must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", crate::domain::text::printable(&e.to_string()));
            ExitCode::from(e.exit_code())
        }
    }
}

/// Prints `value` as YAML or JSON on stdout.
pub(crate) fn print<T: serde::Serialize>(
    value: &T,
    format: crate::cli::OutputFormat,
) -> Result<(), AppError> {
    let text = match format {
        crate::cli::OutputFormat::Yaml => {
            serde_yaml::to_string(value).map_err(|e| AppError::Failed(e.to_string()))?
        }
        crate::cli::OutputFormat::Json => {
            let mut s =
                serde_json::to_string_pretty(value).map_err(|e| AppError::Failed(e.to_string()))?;
            s.push('\n');
            s
        }
    };
    print!("{text}");
    Ok(())
}
