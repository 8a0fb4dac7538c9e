//! Cyborg 17's tables, read and written as Cyborg's objects and `db/sqlalchemy/api.py`
//! do: new rows get a random UUID and `created_at` (UTC, no zone, microseconds: the text
//! SQLAlchemy writes on SQLite and MySQL's `DATETIME` takes), changed rows `updated_at`;
//! lists come newest first (Cyborg's `sort_key='created_at', sort_dir='desc'`), which is
//! the order Cyborg's report diff takes its "first match" from.
//!
//! Every read names its columns through [`Dialect`]: sqlx's Any driver reads none of
//! MySQL's `ENUM`, `TEXT` (as text), `TINYINT` or `INT(11)` columns as Cyborg declares
//! them, so on MySQL they are read through `CAST`s.

use chrono::Utc;
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{Any, AnyPool, Row, Transaction};
use uuid::Uuid;

/// Why the database refused or could not be used.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The database answered with an error.
    #[error("database: {0}")]
    Sql(#[from] sqlx::Error),
    /// The URL names a backend Cyborg does not run on.
    #[error("database URL {0:?}: Cyborg 17 runs on SQLite (sqlite:) or MySQL/MariaDB (mysql:)")]
    Backend(String),
    /// The database holds tables but not Cyborg 17's schema.
    #[error("the database is not Cyborg 17's (alembic revision {found}, want {want}): {hint}")]
    NotCyborg17 {
        /// What `alembic_version` holds (`none` without the table).
        found: String,
        /// Cyborg 17's revision.
        want: &'static str,
        /// What to do.
        hint: &'static str,
    },
    /// A stored value does not parse as what its column holds.
    #[error("stored {what} does not parse")]
    Corrupt {
        /// Which value, and why.
        what: String,
    },
    /// A row the operation needs is not there.
    #[error("{what} not found")]
    NotFound {
        /// Which row.
        what: String,
    },
}

/// The two SQL dialects Cyborg's tables are kept in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite.
    Sqlite,
    /// MySQL or MariaDB.
    MySql,
}

impl Dialect {
    fn of(url: &str) -> Result<Dialect, DbError> {
        if url.starts_with("sqlite:") {
            Ok(Dialect::Sqlite)
        } else if url.starts_with("mysql:") || url.starts_with("mariadb:") {
            Ok(Dialect::MySql)
        } else {
            Err(DbError::Backend(url.to_owned()))
        }
    }

    /// `col` read as a 64-bit integer.
    pub fn int(self, col: &str) -> String {
        match self {
            Dialect::Sqlite => col.to_owned(),
            Dialect::MySql => format!("CAST({col} AS SIGNED)"),
        }
    }

    /// `col` read as text.
    pub fn text(self, col: &str) -> String {
        match self {
            Dialect::Sqlite => col.to_owned(),
            Dialect::MySql => format!("CAST({col} AS CHAR)"),
        }
    }

    /// A `DATETIME` column read as its text (`YYYY-MM-DD HH:MM:SS[.ffffff]`): the Any
    /// driver reads the type on neither backend.
    pub fn time(self, col: &str) -> String {
        match self {
            Dialect::Sqlite => format!("CAST({col} AS TEXT)"),
            Dialect::MySql => format!("CAST({col} AS CHAR)"),
        }
    }

    /// A column named `key` (a reserved word on MySQL).
    pub fn key(self) -> &'static str {
        match self {
            Dialect::Sqlite => "key",
            Dialect::MySql => "`key`",
        }
    }
}

/// Text column `i` of `row`: MySQL hands a `TEXT` column (`std_board_info`,
/// attributes' `key` and `value`) to sqlx's Any driver as bytes, even through a `CAST`.
pub fn text(row: &AnyRow, i: usize) -> Result<Option<String>, DbError> {
    match row.try_get::<Option<String>, _>(i) {
        Ok(v) => Ok(v),
        Err(sqlx::Error::ColumnDecode { .. }) => {
            let bytes: Option<Vec<u8>> = row.try_get(i)?;
            bytes
                .map(|b| {
                    String::from_utf8(b).map_err(|e| DbError::Sql(sqlx::Error::Decode(Box::new(e))))
                })
                .transpose()
        }
        Err(e) => Err(e.into()),
    }
}

/// Like [`text`], for a `NOT NULL` column.
fn required_text(row: &AnyRow, i: usize) -> Result<String, DbError> {
    text(row, i)?.ok_or_else(|| {
        DbError::Sql(sqlx::Error::ColumnDecode {
            index: i.to_string(),
            source: "NULL in a NOT NULL column".into(),
        })
    })
}

/// The time Cyborg's rows record: UTC, without a zone, to the microsecond.
pub fn now() -> String {
    Utc::now()
        .naive_utc()
        .format("%Y-%m-%d %H:%M:%S%.6f")
        .to_string()
}

/// A device row and what hangs off it, as Cyborg's `DriverDevice.list` reads a host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredDevice {
    /// `devices.id`.
    pub id: i64,
    /// `devices.type`.
    pub r#type: String,
    /// `devices.vendor`.
    pub vendor: String,
    /// `devices.model`.
    pub model: String,
    /// `devices.std_board_info`.
    pub std_board_info: Option<String>,
    /// `devices.vendor_board_info`.
    pub vendor_board_info: Option<String>,
    /// Its control path (Cyborg lists only devices that have one).
    pub cpid: StoredControlPath,
    /// Its deployables, newest first.
    pub deployables: Vec<StoredDeployable>,
}

/// A `controlpath_ids` row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredControlPath {
    /// `controlpath_ids.id`.
    pub id: i64,
    /// `controlpath_ids.cpid_info`.
    pub cpid_info: String,
}

/// A `deployables` row with its attributes and attach handles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredDeployable {
    /// `deployables.id`.
    pub id: i64,
    /// `deployables.name`.
    pub name: String,
    /// `deployables.num_accelerators`.
    pub num_accelerators: i64,
    /// Its attributes (key, value) in the order stored.
    pub attributes: Vec<(String, String)>,
    /// Its attach handles, newest first.
    pub handles: Vec<StoredHandle>,
}

/// An `attach_handles` row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredHandle {
    /// `attach_handles.id`.
    pub id: i64,
    /// `attach_handles.attach_type`.
    pub attach_type: String,
    /// `attach_handles.attach_info`.
    pub attach_info: String,
}

/// A new device as an agent reported it (`DriverDevice.create`'s values).
#[derive(Clone, Debug)]
pub struct NewDevice<'a> {
    /// `type`.
    pub r#type: &'a str,
    /// `vendor`.
    pub vendor: &'a str,
    /// `model`.
    pub model: &'a str,
    /// `std_board_info`.
    pub std_board_info: Option<&'a str>,
    /// `vendor_board_info`.
    pub vendor_board_info: Option<&'a str>,
    /// `device_state`; Cyborg's `Device.create` makes an unset one `available`.
    pub device_state: &'a str,
    /// The control path's type (`PCI`).
    pub cpid_type: &'a str,
    /// The control path's `cpid_info` text, as the agent sent it.
    pub cpid_info: &'a str,
}

/// A new deployable (`DriverDeployable.create`'s values).
#[derive(Clone, Debug)]
pub struct NewDeployable<'a> {
    /// `name`.
    pub name: &'a str,
    /// `num_accelerators`.
    pub num_accelerators: i64,
    /// `driver_name`.
    pub driver_name: Option<&'a str>,
    /// Its attributes.
    pub attributes: Vec<(&'a str, &'a str)>,
    /// Its attach handles: (attach_type, attach_info, in_use).
    pub handles: Vec<(&'a str, &'a str, bool)>,
}

/// Cyborg 17's database.
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    dialect: Dialect,
}

type Tx = Transaction<'static, Any>;

impl Store {
    /// Connects to `url` (`sqlite:...` or `mysql://...`). SQLite enforces the foreign
    /// keys (as MySQL's InnoDB does for Cyborg's deployments), so a delete that would
    /// leave a request pointing at a gone handle is refused there too.
    pub async fn connect(url: &str) -> Result<Store, DbError> {
        let dialect = Dialect::of(url)?;
        sqlx::any::install_default_drivers();
        let url = match dialect {
            Dialect::Sqlite if !url.contains('?') => format!("{url}?mode=rwc"),
            _ => url.to_owned(),
        };
        let pool = AnyPoolOptions::new()
            .max_connections(match dialect {
                Dialect::Sqlite => 1,
                Dialect::MySql => 8,
            })
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if dialect == Dialect::Sqlite {
                        sqlx::query("PRAGMA foreign_keys = ON")
                            .execute(&mut *conn)
                            .await?;
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await?;
        Ok(Store { pool, dialect })
    }

    /// The dialect of the database.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The pool, for reads of tests and tools.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Makes the database Cyborg 17's: an empty one gets Cyborg's schema, stamped with
    /// [`accel_cyborg17::schema::ALEMBIC_HEAD`] (so Cyborg's own `cyborg-dbsync` sees it
    /// as its own); one already at that revision is left as it is; anything else is
    /// refused before writing. Returns whether the schema was made.
    pub async fn sync(&self) -> Result<bool, DbError> {
        let tables = self.tables().await?;
        if tables.is_empty() {
            let script = match self.dialect {
                Dialect::Sqlite => accel_cyborg17::schema::SQLITE,
                Dialect::MySql => accel_cyborg17::schema::MYSQL,
            };
            sqlx::raw_sql(script).execute(&self.pool).await?;
            return Ok(true);
        }
        self.at_cyborg17(&tables).await?;
        Ok(false)
    }

    /// Checks, without writing, that the database holds Cyborg 17's schema (what an API
    /// process needs: it never makes the schema, as Cyborg's `cyborg-api` does not).
    pub async fn check(&self) -> Result<(), DbError> {
        let tables = self.tables().await?;
        self.at_cyborg17(&tables).await
    }

    async fn at_cyborg17(&self, tables: &[String]) -> Result<(), DbError> {
        let want = accel_cyborg17::schema::ALEMBIC_HEAD;
        let found = if tables.iter().any(|t| t == "alembic_version") {
            let q = format!(
                "SELECT {} FROM alembic_version",
                self.dialect.text("version_num")
            );
            sqlx::query_scalar::<_, String>(&q)
                .fetch_optional(&self.pool)
                .await?
                .unwrap_or_else(|| "none".to_owned())
        } else {
            "none".to_owned()
        };
        if found == want {
            return Ok(());
        }
        let hint = if tables.iter().any(|t| t == "_sqlx_migrations") {
            "it is accel's own database; `accel db sync` keeps that one"
        } else if tables.is_empty() {
            "it is empty; Cyborg 17's conductor makes the schema when it starts"
        } else {
            "upgrade it with Cyborg 17's `cyborg-dbsync upgrade` first, or use an empty database"
        };
        Err(DbError::NotCyborg17 { found, want, hint })
    }

    async fn tables(&self) -> Result<Vec<String>, DbError> {
        let q = match self.dialect {
            Dialect::Sqlite => {
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                    .to_owned()
            }
            Dialect::MySql => format!(
                "SELECT {} FROM information_schema.tables WHERE table_schema = DATABASE()",
                self.dialect.text("table_name")
            ),
        };
        Ok(sqlx::query_scalar::<_, String>(&q)
            .fetch_all(&self.pool)
            .await?)
    }

    /// Starts a transaction.
    pub async fn begin(&self) -> Result<Tx, DbError> {
        Ok(self.pool.begin().await?)
    }

    /// What Cyborg's `DriverDevice.list(host)` reads: the host's devices that have a
    /// control path, newest first, each with its first control path, its deployables
    /// (newest first) and their attributes and attach handles.
    pub async fn host_devices(&self, host: &str) -> Result<Vec<StoredDevice>, DbError> {
        let d = self.dialect;
        let q = format!(
            "SELECT {id}, {ty}, {vendor}, {model}, {std}, {vbi} FROM devices \
             WHERE hostname = ? ORDER BY created_at DESC, id DESC",
            id = d.int("id"),
            ty = d.text("type"),
            vendor = d.text("vendor"),
            model = d.text("model"),
            std = d.text("std_board_info"),
            vbi = d.text("vendor_board_info"),
        );
        let rows = sqlx::query(&q).bind(host).fetch_all(&self.pool).await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let id: i64 = row.try_get(0)?;
            let Some(cpid) = self.first_control_path(id).await? else {
                continue;
            };
            out.push(StoredDevice {
                id,
                r#type: required_text(&row, 1)?,
                vendor: required_text(&row, 2)?,
                model: required_text(&row, 3)?,
                std_board_info: text(&row, 4)?,
                vendor_board_info: text(&row, 5)?,
                cpid,
                deployables: self.device_deployables(id).await?,
            });
        }
        Ok(out)
    }

    async fn first_control_path(
        &self,
        device_id: i64,
    ) -> Result<Option<StoredControlPath>, DbError> {
        let d = self.dialect;
        let q = format!(
            "SELECT {}, {} FROM controlpath_ids WHERE device_id = ? \
             ORDER BY created_at DESC, id DESC LIMIT 1",
            d.int("id"),
            d.text("cpid_info")
        );
        let row = sqlx::query(&q)
            .bind(device_id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r: AnyRow| {
            Ok(StoredControlPath {
                id: r.try_get(0)?,
                cpid_info: required_text(&r, 1)?,
            })
        })
        .transpose()
    }

    async fn device_deployables(&self, device_id: i64) -> Result<Vec<StoredDeployable>, DbError> {
        let d = self.dialect;
        let q = format!(
            "SELECT {}, {}, {} FROM deployables WHERE device_id = ? \
             ORDER BY created_at DESC, id DESC",
            d.int("id"),
            d.text("name"),
            d.int("num_accelerators")
        );
        let rows = sqlx::query(&q)
            .bind(device_id)
            .fetch_all(&self.pool)
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let id: i64 = row.try_get(0)?;
            out.push(StoredDeployable {
                id,
                name: required_text(&row, 1)?,
                num_accelerators: row.try_get(2)?,
                attributes: self.attributes(id).await?,
                handles: self.handles(id).await?,
            });
        }
        Ok(out)
    }

    async fn attributes(&self, deployable_id: i64) -> Result<Vec<(String, String)>, DbError> {
        let d = self.dialect;
        let q = format!(
            "SELECT {}, {} FROM attributes WHERE deployable_id = ? ORDER BY id",
            d.text(d.key()),
            d.text("value")
        );
        let rows = sqlx::query(&q)
            .bind(deployable_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((required_text(r, 0)?, required_text(r, 1)?)))
            .collect()
    }

    async fn handles(&self, deployable_id: i64) -> Result<Vec<StoredHandle>, DbError> {
        let d = self.dialect;
        let q = format!(
            "SELECT {}, {}, {} FROM attach_handles WHERE deployable_id = ? \
             ORDER BY created_at DESC, id DESC",
            d.int("id"),
            d.text("attach_type"),
            d.text("attach_info")
        );
        let rows = sqlx::query(&q)
            .bind(deployable_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(StoredHandle {
                    id: r.try_get(0)?,
                    attach_type: required_text(r, 1)?,
                    attach_info: required_text(r, 2)?,
                })
            })
            .collect()
    }

    /// Inserts a row and returns its id (`RETURNING`: SQLite 3.35+, MariaDB 10.5+;
    /// sqlx's Any driver reports no last insert id for SQLite).
    async fn insert(
        tx: &mut Tx,
        dialect: Dialect,
        sql: &str,
        binds: Vec<Bind<'_>>,
    ) -> Result<i64, DbError> {
        let sql = format!("{sql} RETURNING {}", dialect.int("id"));
        let mut q = sqlx::query_scalar::<_, i64>(&sql);
        for b in binds {
            q = match b {
                Bind::Text(t) => q.bind(t.to_owned()),
                Bind::OptText(t) => q.bind(t.map(str::to_owned)),
                Bind::Int(i) => q.bind(i),
            };
        }
        Ok(q.fetch_one(&mut **tx).await?)
    }

    /// Stores a new device with its control path and deployables in one transaction
    /// (Cyborg's `DriverDevice.create`: device, control path, then each deployable with
    /// its attributes and handles). Returns the device's and the control path's ids.
    pub async fn create_device(
        &self,
        host: &str,
        device: &NewDevice<'_>,
        deployables: &[NewDeployable<'_>],
    ) -> Result<(i64, i64), DbError> {
        let mut tx = self.begin().await?;
        let now = now();
        let device_id = Self::insert(
            &mut tx,
            self.dialect,
            "INSERT INTO devices (created_at, uuid, type, vendor, model, std_board_info, \
             vendor_board_info, hostname, status, device_state) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'enabled', ?)",
            vec![
                Bind::Text(&now),
                Bind::Text(&Uuid::new_v4().to_string()),
                Bind::Text(device.r#type),
                Bind::Text(device.vendor),
                Bind::Text(device.model),
                Bind::OptText(device.std_board_info),
                Bind::OptText(device.vendor_board_info),
                Bind::Text(host),
                Bind::Text(device.device_state),
            ],
        )
        .await?;
        let cpid_id = Self::insert(
            &mut tx,
            self.dialect,
            "INSERT INTO controlpath_ids (created_at, uuid, device_id, cpid_type, cpid_info) \
             VALUES (?, ?, ?, ?, ?)",
            vec![
                Bind::Text(&now),
                Bind::Text(&Uuid::new_v4().to_string()),
                Bind::Int(device_id),
                Bind::Text(device.cpid_type),
                Bind::Text(device.cpid_info),
            ],
        )
        .await?;
        for dep in deployables {
            Self::insert_deployable(&mut tx, self.dialect, device_id, cpid_id, dep).await?;
        }
        tx.commit().await?;
        Ok((device_id, cpid_id))
    }

    /// Stores a new deployable of a device (Cyborg's `DriverDeployable.create`).
    pub async fn create_deployable(
        &self,
        device_id: i64,
        cpid_id: i64,
        dep: &NewDeployable<'_>,
    ) -> Result<i64, DbError> {
        let mut tx = self.begin().await?;
        let id = Self::insert_deployable(&mut tx, self.dialect, device_id, cpid_id, dep).await?;
        tx.commit().await?;
        Ok(id)
    }

    async fn insert_deployable(
        tx: &mut Tx,
        dialect: Dialect,
        device_id: i64,
        cpid_id: i64,
        dep: &NewDeployable<'_>,
    ) -> Result<i64, DbError> {
        let now = now();
        let id = Self::insert(
            tx,
            dialect,
            "INSERT INTO deployables (created_at, uuid, name, num_accelerators, device_id, \
             driver_name) VALUES (?, ?, ?, ?, ?, ?)",
            vec![
                Bind::Text(&now),
                Bind::Text(&Uuid::new_v4().to_string()),
                Bind::Text(dep.name),
                Bind::Int(dep.num_accelerators),
                Bind::Int(device_id),
                Bind::OptText(dep.driver_name),
            ],
        )
        .await?;
        for (key, value) in &dep.attributes {
            Self::insert_attribute(tx, dialect, id, key, value).await?;
        }
        for (attach_type, attach_info, in_use) in &dep.handles {
            Self::insert_handle(tx, dialect, id, cpid_id, attach_type, attach_info, *in_use)
                .await?;
        }
        Ok(id)
    }

    async fn insert_attribute(
        tx: &mut Tx,
        dialect: Dialect,
        deployable_id: i64,
        key: &str,
        value: &str,
    ) -> Result<i64, DbError> {
        let sql = format!(
            "INSERT INTO attributes (created_at, uuid, deployable_id, {}, value) \
             VALUES (?, ?, ?, ?, ?)",
            dialect.key()
        );
        Self::insert(
            tx,
            dialect,
            &sql,
            vec![
                Bind::Text(&now()),
                Bind::Text(&Uuid::new_v4().to_string()),
                Bind::Int(deployable_id),
                Bind::Text(key),
                Bind::Text(value),
            ],
        )
        .await
    }

    async fn insert_handle(
        tx: &mut Tx,
        dialect: Dialect,
        deployable_id: i64,
        cpid_id: i64,
        attach_type: &str,
        attach_info: &str,
        in_use: bool,
    ) -> Result<i64, DbError> {
        Self::insert(
            tx,
            dialect,
            "INSERT INTO attach_handles (created_at, uuid, deployable_id, cpid_id, in_use, \
             attach_type, attach_info) VALUES (?, ?, ?, ?, ?, ?, ?)",
            vec![
                Bind::Text(&now()),
                Bind::Text(&Uuid::new_v4().to_string()),
                Bind::Int(deployable_id),
                Bind::Int(cpid_id),
                Bind::Int(i64::from(in_use)),
                Bind::Text(attach_type),
                Bind::Text(attach_info),
            ],
        )
        .await
    }

    /// Adds an attribute to a deployable (Cyborg's `DriverAttribute.create`).
    pub async fn create_attribute(
        &self,
        deployable_id: i64,
        key: &str,
        value: &str,
    ) -> Result<(), DbError> {
        let mut tx = self.begin().await?;
        Self::insert_attribute(&mut tx, self.dialect, deployable_id, key, value).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Adds an attach handle (Cyborg's `DriverAttachHandle.create`).
    pub async fn create_handle(
        &self,
        deployable_id: i64,
        cpid_id: i64,
        attach_type: &str,
        attach_info: &str,
        in_use: bool,
    ) -> Result<(), DbError> {
        let mut tx = self.begin().await?;
        Self::insert_handle(
            &mut tx,
            self.dialect,
            deployable_id,
            cpid_id,
            attach_type,
            attach_info,
            in_use,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Deletes a device with everything under it, children first (Cyborg's
    /// `DriverDevice.destroy`; its MySQL foreign keys are `RESTRICT`): for each of the
    /// `deployables` named (found by name on the device, as Cyborg finds them), the
    /// handles whose `attach_info` is listed, every attribute and the deployable; then
    /// the control path whose `cpid_info` is given, then the device.
    pub async fn destroy_device(
        &self,
        host: &str,
        cpid_info: &str,
        deployables: &[(String, Vec<String>)],
    ) -> Result<(), DbError> {
        let Some(device_id) = self.device_of(host, cpid_info).await? else {
            return Err(DbError::NotFound {
                what: format!("the device of host {host} with control path {cpid_info}"),
            });
        };
        let mut tx = self.begin().await?;
        for (name, infos) in deployables {
            Self::destroy_deployable_in(&mut tx, self.dialect, device_id, name, infos).await?;
        }
        sqlx::query("DELETE FROM controlpath_ids WHERE device_id = ? AND cpid_info = ?")
            .bind(device_id)
            .bind(cpid_info)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM devices WHERE id = ?")
            .bind(device_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The id of the host's device (newest first) whose control path is `cpid_info`
    /// (Cyborg's `DriverDevice.get_device_obj`).
    pub async fn device_of(&self, host: &str, cpid_info: &str) -> Result<Option<i64>, DbError> {
        let d = self.dialect;
        let q = format!(
            "SELECT {} FROM devices d WHERE d.hostname = ? AND EXISTS \
             (SELECT 1 FROM controlpath_ids c WHERE c.device_id = d.id AND c.cpid_info = ?) \
             ORDER BY d.created_at DESC, d.id DESC LIMIT 1",
            d.int("d.id")
        );
        Ok(sqlx::query_scalar::<_, i64>(&q)
            .bind(host)
            .bind(cpid_info)
            .fetch_optional(&self.pool)
            .await?)
    }

    /// Deletes one deployable of a device as [`Store::destroy_device`] does each.
    pub async fn destroy_deployable(
        &self,
        device_id: i64,
        name: &str,
        handle_infos: &[String],
    ) -> Result<(), DbError> {
        let mut tx = self.begin().await?;
        Self::destroy_deployable_in(&mut tx, self.dialect, device_id, name, handle_infos).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn destroy_deployable_in(
        tx: &mut Tx,
        dialect: Dialect,
        device_id: i64,
        name: &str,
        handle_infos: &[String],
    ) -> Result<(), DbError> {
        let q = format!(
            "SELECT {} FROM deployables WHERE name = ? AND device_id = ? \
             ORDER BY created_at DESC, id DESC LIMIT 1",
            dialect.int("id")
        );
        let Some(dep_id) = sqlx::query_scalar::<_, i64>(&q)
            .bind(name)
            .bind(device_id)
            .fetch_optional(&mut **tx)
            .await?
        else {
            return Ok(());
        };
        for info in handle_infos {
            Self::delete_first_handle(tx, dialect, dep_id, info).await?;
        }
        sqlx::query("DELETE FROM attributes WHERE deployable_id = ?")
            .bind(dep_id)
            .execute(&mut **tx)
            .await?;
        sqlx::query("DELETE FROM deployables WHERE id = ?")
            .bind(dep_id)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    async fn delete_first_handle(
        tx: &mut Tx,
        dialect: Dialect,
        deployable_id: i64,
        attach_info: &str,
    ) -> Result<(), DbError> {
        let q = format!(
            "SELECT {} FROM attach_handles WHERE deployable_id = ? AND attach_info = ? \
             ORDER BY created_at DESC, id DESC LIMIT 1",
            dialect.int("id")
        );
        if let Some(id) = sqlx::query_scalar::<_, i64>(&q)
            .bind(deployable_id)
            .bind(attach_info)
            .fetch_optional(&mut **tx)
            .await?
        {
            sqlx::query("DELETE FROM attach_handles WHERE id = ?")
                .bind(id)
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }

    /// Deletes the first handle of a deployable with `attach_info` (Cyborg's
    /// `DriverAttachHandle.destroy`).
    pub async fn destroy_handle(
        &self,
        deployable_id: i64,
        attach_info: &str,
    ) -> Result<(), DbError> {
        let mut tx = self.begin().await?;
        Self::delete_first_handle(&mut tx, self.dialect, deployable_id, attach_info).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Updates the changed board fields of a device (`Device.save` of Cyborg's report
    /// diff); `changes` are (column, new value); nothing happens without changes.
    pub async fn update_device(
        &self,
        device_id: i64,
        changes: &[(&'static str, Option<String>)],
    ) -> Result<(), DbError> {
        if changes.is_empty() {
            return Ok(());
        }
        let sets: Vec<String> = changes.iter().map(|(c, _)| format!("{c} = ?")).collect();
        let q = format!(
            "UPDATE devices SET {}, updated_at = ? WHERE id = ?",
            sets.join(", ")
        );
        let mut query = sqlx::query(&q);
        for (_, v) in changes {
            query = query.bind(v.clone());
        }
        query
            .bind(now())
            .bind(device_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The id and accelerators of the first deployable named `name` of a device.
    pub async fn deployable_by_name(
        &self,
        device_id: i64,
        name: &str,
    ) -> Result<Option<(i64, i64)>, DbError> {
        let d = self.dialect;
        let q = format!(
            "SELECT {}, {} FROM deployables WHERE name = ? AND device_id = ? \
             ORDER BY created_at DESC, id DESC LIMIT 1",
            d.int("id"),
            d.int("num_accelerators")
        );
        let row = sqlx::query(&q)
            .bind(name)
            .bind(device_id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r: AnyRow| Ok((r.try_get(0)?, r.try_get(1)?)))
            .transpose()
    }

    /// Sets a deployable's accelerators.
    pub async fn set_accelerators(&self, deployable_id: i64, n: i64) -> Result<(), DbError> {
        sqlx::query("UPDATE deployables SET num_accelerators = ?, updated_at = ? WHERE id = ?")
            .bind(n)
            .bind(now())
            .bind(deployable_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Records the provider Placement holds for the first deployable named `name` of a
    /// device (Cyborg's `get_placement_needed_info_and_report`).
    pub async fn set_rp_uuid(
        &self,
        device_id: i64,
        name: &str,
        rp_uuid: &str,
    ) -> Result<(), DbError> {
        let Some((id, _)) = self.deployable_by_name(device_id, name).await? else {
            return Err(DbError::NotFound {
                what: format!("deployable {name}"),
            });
        };
        sqlx::query("UPDATE deployables SET rp_uuid = ?, updated_at = ? WHERE id = ?")
            .bind(rp_uuid)
            .bind(now())
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Deletes every attribute of a deployable with `key` (`DriverAttribute.delete_by_key`).
    pub async fn delete_attributes(&self, deployable_id: i64, key: &str) -> Result<(), DbError> {
        let q = format!(
            "DELETE FROM attributes WHERE deployable_id = ? AND {} = ?",
            self.dialect.key()
        );
        sqlx::query(&q)
            .bind(deployable_id)
            .bind(key)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Sets the value of the first attribute of a deployable with `key`
    /// (`Attribute.get_by_dep_key` and `save`).
    pub async fn set_attribute(
        &self,
        deployable_id: i64,
        key: &str,
        value: &str,
    ) -> Result<(), DbError> {
        let d = self.dialect;
        let q = format!(
            "SELECT {} FROM attributes WHERE deployable_id = ? AND {} = ? ORDER BY id LIMIT 1",
            d.int("id"),
            d.key()
        );
        let Some(id) = sqlx::query_scalar::<_, i64>(&q)
            .bind(deployable_id)
            .bind(key)
            .fetch_optional(&self.pool)
            .await?
        else {
            return Err(DbError::NotFound {
                what: format!("attribute {key} of deployable {deployable_id}"),
            });
        };
        sqlx::query("UPDATE attributes SET value = ?, updated_at = ? WHERE id = ?")
            .bind(value)
            .bind(now())
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Sets the attach type of the first handle of a deployable with `attach_info`.
    pub async fn set_attach_type(
        &self,
        deployable_id: i64,
        attach_info: &str,
        attach_type: &str,
    ) -> Result<(), DbError> {
        let d = self.dialect;
        let q = format!(
            "SELECT {} FROM attach_handles WHERE deployable_id = ? AND attach_info = ? \
             ORDER BY created_at DESC, id DESC LIMIT 1",
            d.int("id")
        );
        if let Some(id) = sqlx::query_scalar::<_, i64>(&q)
            .bind(deployable_id)
            .bind(attach_info)
            .fetch_optional(&self.pool)
            .await?
        {
            sqlx::query("UPDATE attach_handles SET attach_type = ?, updated_at = ? WHERE id = ?")
                .bind(attach_type)
                .bind(now())
                .bind(id)
                .execute(&self.pool)
                .await?;
        }
        Ok(())
    }
}

/// One bound value of [`Store::insert`].
enum Bind<'a> {
    Text(&'a str),
    OptText(Option<&'a str>),
    Int(i64),
}
