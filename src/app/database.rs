//! Which database a command runs on: the configured PostgreSQL URL, or the
//! embedded cluster that sender-indexer manages itself, and in it the
//! schema of `database.schema` (the connection's default when unset).
//! Opening it applies the migrations (in `store`); this module runs no
//! statement of its own.

use anyhow::Context as _;
use sqlx::postgres::PgConnectOptions;

use crate::config::Settings;
use crate::embedded_pg::{Cluster, ClusterOptions};
use crate::redact::redact_url;
use crate::store::Store;

/// The database the settings name, and the embedded server if we started
/// one (stopped when this is dropped).
pub struct Database {
    pub store: Store,
    /// The database as it may be logged: its redacted URL, or where the
    /// embedded cluster lives.
    pub name: String,
    embedded: Option<Cluster>,
}

impl Drop for Database {
    fn drop(&mut self) {
        if let Some(cluster) = self.embedded.take().filter(|c| !c.reused()) {
            let _ = cluster.stop();
        }
    }
}

/// Database name used inside the embedded cluster.
const EMBEDDED_DB: &str = "sender_indexer";

/// Whether opening the database brings its tables up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Migrations {
    /// Creates the schema if missing and applies the migrations (the
    /// indexing commands).
    Apply,
    /// Applies the migrations in a schema that exists (`status`, `logs`):
    /// a mistyped `--schema` is an error, not a new empty schema.
    ApplyExisting,
    /// As it is: for a read-only role (`sql`).
    AsIs,
}

pub async fn open_database(
    settings: &Settings,
    migrations: Migrations,
) -> anyhow::Result<Database> {
    let db = &settings.database;
    let schema = db.schema.as_ref();
    let connect = |options, max| async move {
        match (migrations, schema) {
            (Migrations::Apply | Migrations::ApplyExisting, None) => {
                Store::connect(options, max).await
            }
            (Migrations::Apply, Some(s)) => Store::connect_in(options, max, s, true).await,
            (Migrations::ApplyExisting, Some(s)) => Store::connect_in(options, max, s, false).await,
            (Migrations::AsIs, None) => Store::connect_as_is(options, max).await,
            (Migrations::AsIs, Some(s)) => Store::connect_as_is_in(options, max, s).await,
        }
    };
    if let Some(url) = &db.url {
        let shown = redact_url(url.as_str());
        let options: PgConnectOptions = url
            .as_str()
            .parse()
            .with_context(|| format!("setting database.url: cannot use {shown}"))?;
        let store = match connect(options, db.max_connections.get()).await {
            Ok(store) => store,
            Err(e) if e.connection_lost() => anyhow::bail!(
                "database {shown}: cannot connect: {e}\n\nhint: nothing accepts connections there. Start PostgreSQL or fix DATABASE_URL / --database-url; leave it unset to let sender-indexer run an embedded PostgreSQL of its own"
            ),
            Err(e) => return Err(anyhow::Error::from(e).context(format!("database {shown}"))),
        };
        return Ok(Database {
            store,
            name: shown,
            embedded: None,
        });
    }
    let data_dir = match &db.data_dir {
        Some(dir) => dir.clone(),
        None => crate::embedded_pg::default_data_dir()?,
    };
    let opts = ClusterOptions::new(&data_dir);
    let cluster = tokio::task::spawn_blocking(move || Cluster::start(&opts))
        .await?
        .with_context(|| format!("embedded database in {}", data_dir.display()))?;
    cluster.create_database_if_missing(EMBEDDED_DB).await?;
    let store = connect(
        cluster.connect_options(EMBEDDED_DB),
        db.max_connections.get(),
    )
    .await?;
    Ok(Database {
        store,
        name: format!("embedded in {}", data_dir.display()),
        embedded: Some(cluster),
    })
}
