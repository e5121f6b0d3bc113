use clap::Parser;
use stillweb_server::Args;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,tantivy=warn,tower_http=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let config = Args::parse().validate().map_err(anyhow::Error::msg)?;
    stillweb_server::run(config).await
}
