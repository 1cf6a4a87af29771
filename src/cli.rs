//! Command-line interface: clap definitions, and their conversion into validated
//! settings once, before any work starts. Nothing here performs I/O beyond reading
//! files named on the command line.
//!
//! Conventions carried over from kubectl, flux, oras and cosign: `-o/--output` is always
//! the output FORMAT (yaml or json), never a path; `pull` writes its tar.gz to
//! `--output-file` (cosign's name for "write to this file"); artifacts are named
//! `oci://host[:port]/repo:tag` or `oci://host[:port]/repo@sha256:<hex>`. The examples
//! each `--help` prints live in `cli/help.rs`.

mod controller;
mod gates;
mod help;

pub use controller::{ControllerArgs, RbacArgs};
pub use gates::{FeatureGates, CACHE_SECRETS_AND_CONFIG_MAPS, OBJECT_LEVEL_WORKLOAD_IDENTITY};

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// ocisource: turn OCI artifacts into Flux-compatible tar.gz artifacts.
#[derive(Debug, Parser)]
#[command(
    name = "ocisource",
    version,
    about,
    propagate_version = true,
    after_help = help::ROOT
)]
pub struct Cli {
    /// Log level (error, warn, info, debug, trace) or a tracing filter.
    #[arg(long, global = true, default_value = "warn", env = "OCISOURCE_LOG")]
    pub log_level: String,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogEncoding::Console)]
    pub log_encoding: LogEncoding,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Log output format.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum LogEncoding {
    /// Human-readable lines.
    Console,
    /// One JSON object per line.
    Json,
}

/// Subcommands.
// Parsed once per process: boxing the larger argument sets would save nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Resolve, verify (optional) and pull an OCI artifact into one normalised tar.gz.
    #[command(after_help = help::PULL)]
    Pull(PullArgs),
    /// Publish a directory or a file as an OCI artifact, as `flux push artifact` does.
    #[command(after_help = help::PUSH)]
    Push(PushArgs),
    /// Verify the cosign signature of an OCI artifact.
    #[command(after_help = help::VERIFY)]
    Verify(VerifyArgs),
    /// Sign a manifest (artifact or image) with a cosign key, as `cosign sign --key` does.
    #[command(after_help = help::SIGN)]
    Sign(SignArgs),
    /// Reconcile OCIRepository objects from files once, without a cluster.
    #[command(after_help = help::RECONCILE)]
    Reconcile(ReconcileArgs),
    /// Run the controller in a cluster.
    Controller(ControllerArgs),
    /// Print the OCIRepository CustomResourceDefinition.
    Crd,
    /// Print the RBAC rules the controller needs.
    Rbac(RbacArgs),
    /// Print the client version, as `flux version --client` does.
    #[command(after_help = help::VERSION)]
    Version(VersionArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish or powershell).
    #[command(after_help = help::COMPLETION)]
    Completion(CompletionArgs),
}

/// `ocisource version`.
#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Print `{clientVersion: {version, os, arch}}` as yaml or json instead of one line.
    #[arg(short = 'o', long, value_name = "FORMAT", value_parser = output_format)]
    pub output: Option<OutputFormat>,
}

/// `ocisource completion`.
#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell to write the script for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `ocisource reconcile`.
#[derive(Debug, Args)]
pub struct ReconcileArgs {
    /// YAML files with OCIRepository objects, and the Secrets and ServiceAccounts they reference.
    #[arg(short = 'f', long = "file", required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Artifact store; the previous status of each object is kept here too.
    #[arg(long, default_value = ".ocisource")]
    pub storage: PathBuf,
    /// Address written into artifact URLs.
    #[arg(long, default_value = "localhost:9090")]
    pub storage_adv_addr: String,
    /// Format of the printed `kind: List` of objects: yaml or json.
    #[arg(short = 'o', long, value_name = "FORMAT", default_value = "yaml", value_parser = output_format)]
    pub output: OutputFormat,
    /// Print the number of registry requests to stderr.
    #[arg(long)]
    pub stats: bool,
}

/// Output format of printed objects (`-o/--output`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// YAML.
    #[default]
    Yaml,
    /// JSON.
    Json,
}

/// The value of `-o/--output`: a format, never a path. A path gets a message naming the
/// flag that takes one, so the habits of `curl -o FILE` and `flux pull artifact -o DIR`
/// fail clearly instead of writing somewhere unexpected.
fn output_format(s: &str) -> Result<OutputFormat, String> {
    match s {
        "yaml" => Ok(OutputFormat::Yaml),
        "json" => Ok(OutputFormat::Json),
        other => Err(format!(
            "'{other}' is not an output format: -o/--output takes yaml or json (as in kubectl and flux); pull writes its tar.gz to --output-file FILE, push reads --path"
        )),
    }
}

/// Flags that say how to reach a registry.
#[derive(Debug, Args, Clone, Default)]
pub struct RegistryArgs {
    /// As Flux's `spec.insecure`: HTTPS without certificate verification (unless --ca-file
    /// or --cert-file is given), falling back to plain HTTP.
    #[arg(long)]
    pub insecure: bool,
    /// Plain HTTP from the first request, for any host, as in oras (registries on
    /// localhost, 127.0.0.1, ::1 and private addresses fall back to it by themselves).
    #[arg(long, conflicts_with_all = ["ca_file", "cert_file"])]
    pub plain_http: bool,
    /// PEM file of CA certificates to trust for the registry.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate for mutual TLS (with --key-file).
    #[arg(long, value_name = "FILE", requires = "key_file")]
    pub cert_file: Option<PathBuf>,
    /// PEM private key of the client certificate.
    #[arg(long, value_name = "FILE", requires = "cert_file")]
    pub key_file: Option<PathBuf>,
    /// Credentials as USER:PASSWORD (prefer the env var, or the docker config file).
    #[arg(
        long,
        env = "OCISOURCE_CREDS",
        hide_env_values = true,
        value_name = "USER:PASSWORD"
    )]
    pub creds: Option<String>,
    /// Timeout of each registry request, e.g. 30s, 2m.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub timeout: std::time::Duration,
}

/// Flags of signature verification, shared by `pull` and `verify`. Keyless needs one of
/// the identity flags and one of the issuer flags, as in `cosign verify`.
#[derive(Debug, Args, Clone, Default)]
pub struct VerifyFlags {
    /// Cosign public key (PEM); repeat for several keys, any one may match.
    #[arg(long = "key", value_name = "FILE")]
    pub keys: Vec<PathBuf>,
    /// Keyless: the certificate's identity (SAN: email or URI), exactly.
    #[arg(
        long,
        value_name = "IDENTITY",
        conflicts_with = "certificate_identity_regexp"
    )]
    pub certificate_identity: Option<String>,
    /// Keyless: regex searched for in the certificate's identity (SAN), as in cosign and
    /// Flux; anchor it with ^...$ to match in full.
    #[arg(long, value_name = "REGEX")]
    pub certificate_identity_regexp: Option<String>,
    /// Keyless: the certificate's OIDC issuer, exactly.
    #[arg(
        long,
        value_name = "URL",
        conflicts_with = "certificate_oidc_issuer_regexp"
    )]
    pub certificate_oidc_issuer: Option<String>,
    /// Keyless: regex searched for in the certificate's OIDC issuer, as in cosign and
    /// Flux; anchor it with ^...$ to match in full.
    #[arg(long, value_name = "REGEX")]
    pub certificate_oidc_issuer_regexp: Option<String>,
    /// Sigstore trusted_root.json for a self-hosted Sigstore (default: the bundled public-good root).
    #[arg(long, value_name = "FILE")]
    pub trusted_root: Option<PathBuf>,
}

impl VerifyFlags {
    /// True when any verification was asked for.
    pub fn requested(&self) -> bool {
        !self.keys.is_empty()
            || self.certificate_identity.is_some()
            || self.certificate_identity_regexp.is_some()
            || self.certificate_oidc_issuer.is_some()
            || self.certificate_oidc_issuer_regexp.is_some()
    }
}

/// `ocisource pull`.
#[derive(Debug, Args)]
pub struct PullArgs {
    /// Artifact: oci://host[:port]/repo:tag, oci://host[:port]/repo@sha256:<hex>, or
    /// oci://host[:port]/repo with --tag, --semver or --digest (neither means tag latest).
    #[arg(value_name = "URL")]
    pub url: String,
    /// Tag to pull (default: latest).
    #[arg(long, conflicts_with_all = ["semver", "digest"])]
    pub tag: Option<String>,
    /// Semver range; the highest matching tag is pulled.
    #[arg(long, conflicts_with = "digest")]
    pub semver: Option<String>,
    /// Regex tags must match before the semver range applies.
    #[arg(long, requires = "semver")]
    pub semver_filter: Option<String>,
    /// Manifest digest to pull.
    #[arg(long)]
    pub digest: Option<String>,
    /// Only layers of this media type (all of them are merged).
    #[arg(long)]
    pub layer_media_type: Option<String>,
    /// Merge the layers (extract) or store the first matching layer unchanged (copy).
    #[arg(long, value_enum, default_value_t = LayerOperationArg::Extract)]
    pub layer_operation: LayerOperationArg,
    /// Ignore rules in gitignore syntax; replaces the default exclusions.
    #[arg(long)]
    pub ignore: Option<String>,
    /// Platform to pick from an image index.
    #[arg(long, default_value = "linux/amd64")]
    pub platform: String,
    /// Refuse artifacts whose layers unpack to more than this many bytes (decompression bombs).
    #[arg(long, default_value_t = 8 << 30)]
    pub max_uncompressed_bytes: u64,
    /// Refuse artifacts whose layers hold more than this many entries.
    #[arg(long, default_value_t = 1_000_000)]
    pub max_entries: u64,
    /// Where to write the tar.gz (replaced atomically; untouched when the pull fails), or
    /// - for standard output (the whole checked archive and nothing else; no result printed).
    #[arg(
        long = "output-file",
        value_name = "FILE.tar.gz",
        required_unless_present = "extract"
    )]
    pub output_file: Option<PathBuf>,
    /// Unpack the normalised tar.gz into this new or empty directory instead (as
    /// `flux pull artifact -o DIR` and `oras pull -o DIR`); files and directories only.
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with_all = ["output_file", "layer_operation"]
    )]
    pub extract: Option<PathBuf>,
    /// Format of the printed result: yaml or json.
    #[arg(short = 'o', long, value_name = "FORMAT", default_value = "yaml", value_parser = output_format)]
    pub output: OutputFormat,
    /// No transfer progress on stderr (errors are still printed there).
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Registry connection.
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Verify the signature before pulling.
    #[command(flatten)]
    pub verify: VerifyFlags,
}

/// `--layer-operation`.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum LayerOperationArg {
    /// Merge layers into one normalised tar.gz.
    Extract,
    /// Store the first matching layer byte for byte.
    Copy,
}

/// `ocisource push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// Destination, oci://host[:port]/repo:tag (a tag is required: a digest names content
    /// that exists already).
    #[arg(value_name = "URL")]
    pub url: String,
    /// What to publish: a directory, a single file, or - for standard input (stored as
    /// one file named stdin.yaml, e.g. the output of `kustomize build`).
    #[arg(long, value_name = "DIR|FILE|-")]
    pub path: PathBuf,
    /// Paths to leave out, in .gitignore syntax, comma-separated or repeated (as in flux);
    /// replaces the default media and archive patterns. VCS files (.git/, .gitignore,
    /// .gitmodules, .gitattributes) are always left out; `.sourceignore` files apply too.
    #[arg(long, value_name = "PATTERNS", value_delimiter = ',')]
    pub ignore_paths: Option<Vec<String>>,
    /// Extra manifest annotation KEY=VALUE (repeatable).
    #[arg(long = "annotation", value_name = "KEY=VALUE")]
    pub annotations: Vec<String>,
    /// Source URL recorded in org.opencontainers.image.source.
    #[arg(long)]
    pub source: Option<String>,
    /// Source revision recorded in org.opencontainers.image.revision.
    #[arg(long)]
    pub revision: Option<String>,
    /// Sign the pushed manifest with this ECDSA P-256 private key: cosign's encrypted
    /// `cosign.key` (password in COSIGN_PASSWORD), PKCS#8 `PRIVATE KEY` or SEC1 `EC PRIVATE KEY` PEM.
    #[arg(long, value_name = "FILE")]
    pub sign_key: Option<PathBuf>,
    /// Format of the printed result (Flux's fields: url, repository, tag, digest): yaml or json.
    #[arg(short = 'o', long, value_name = "FORMAT", default_value = "yaml", value_parser = output_format)]
    pub output: OutputFormat,
    /// No transfer progress on stderr (errors are still printed there).
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Registry connection.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// `ocisource verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Artifact, oci://host[:port]/repo:tag or oci://host[:port]/repo@sha256:<hex>; one
    /// of them is required (no silent `latest`).
    #[arg(value_name = "URL")]
    pub url: String,
    /// Format of the printed result (cosign's: a list of verified payloads): json or yaml.
    #[arg(short = 'o', long, value_name = "FORMAT", default_value = "json", value_parser = output_format)]
    pub output: OutputFormat,
    /// Verification settings.
    #[command(flatten)]
    pub verify: VerifyFlags,
    /// Registry connection.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// `ocisource sign`.
#[derive(Debug, Args)]
pub struct SignArgs {
    /// Manifest to sign, oci://host[:port]/repo@sha256:<hex> (or :tag, resolved to its
    /// digest first).
    #[arg(value_name = "URL")]
    pub url: String,
    /// ECDSA P-256 private key: cosign's encrypted `cosign.key` (password in
    /// COSIGN_PASSWORD), PKCS#8 `PRIVATE KEY` or SEC1 `EC PRIVATE KEY` PEM.
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// Format of the printed result (repository, digest, signature tag): yaml or json.
    #[arg(short = 'o', long, value_name = "FORMAT", default_value = "yaml", value_parser = output_format)]
    pub output: OutputFormat,
    /// Registry connection.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Parses `90s`, `5m`, `1h30m`, `250ms` (Go/Kubernetes duration syntax, the subset Flux uses).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    crate::domain::duration::parse(s).map_err(|e| e.to_string())
}

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;
