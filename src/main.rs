//! The ocisource binary. Until the full CLI (clap, telemetry, controller) lands here, it
//! only prints generated manifests: `ocisource crd` (the OCIRepository CRD) and
//! `ocisource rbac` (the RBAC rules the controller needs).

use std::process::ExitCode;

fn main() -> ExitCode {
    match std::env::args().nth(1).as_deref() {
        Some("crd") => print!("{}", ocisource::api::crds_yaml()),
        Some("rbac") => print!("{}", ocisource::api::rbac::rules_yaml()),
        _ => {
            eprintln!("usage: ocisource crd | rbac");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}
