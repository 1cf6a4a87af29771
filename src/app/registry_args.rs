//! Registry connection settings from CLI flags: TLS files, credentials from `--creds` or
//! the docker config file, timeout; errors of the session name these flags
//! ([`Audience::Cli`]).

use crate::cli::RegistryArgs;
use crate::domain::secret::{Credentials, Redacted};
use crate::ports::{Audience, ClientIdentity, RegistryOptions};
use crate::registry::credential_helper;

use super::AppError;

fn read(path: &std::path::Path, flag: &str) -> Result<Vec<u8>, AppError> {
    std::fs::read(path)
        .map_err(|e| AppError::Input(format!("failed to read {flag} '{}': {e}", path.display())))
}

/// Builds the options for `host` from the flags.
pub fn options(args: &RegistryArgs, host: &str) -> Result<RegistryOptions, AppError> {
    let credentials = match &args.creds {
        Some(c) => {
            let (user, pass) = c
                .split_once(':')
                .ok_or_else(|| AppError::Input("invalid --creds: expected USER:PASSWORD".into()))?;
            Some(Credentials {
                username: user.to_string(),
                password: Redacted::new(pass.to_string()),
            })
        }
        None => credential_helper::default_credentials(host).map_err(|e| {
            AppError::Input(format!("failed to read the docker config for {host}: {e}"))
        })?,
    };
    let client_identity = match (&args.cert_file, &args.key_file) {
        (Some(c), Some(k)) => Some(ClientIdentity {
            cert_pem: read(c, "--cert-file")?,
            key_pem: Redacted::new(read(k, "--key-file")?),
        }),
        _ => None,
    };
    Ok(RegistryOptions {
        insecure: args.insecure,
        plain_http: args.plain_http,
        credentials,
        ca_pem: args
            .ca_file
            .as_deref()
            .map(|p| read(p, "--ca-file"))
            .transpose()?,
        client_identity,
        proxy: None,
        timeout: Some(args.timeout),
        user_agent: None,
        audience: Audience::Cli,
    })
}
