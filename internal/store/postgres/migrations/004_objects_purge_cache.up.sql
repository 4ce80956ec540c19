-- The object service: one row per object. upload_id is set while the
-- upload is unfinished and cleared by finishUpload; hashes is a JSON object
-- {algorithm: hex}. Unfinished uploads expire at upload_expires, finished
-- objects at expires.
CREATE TABLE objects (
    name           TEXT PRIMARY KEY,
    project_id     TEXT NOT NULL,
    upload_id      TEXT NOT NULL,
    upload_expires BIGINT NOT NULL,
    expires        BIGINT NOT NULL,
    hashes         TEXT NOT NULL,
    created        BIGINT NOT NULL
);
CREATE INDEX objects_expires ON objects (expires);
CREATE INDEX objects_upload_expires ON objects (upload_expires) WHERE upload_id <> '';

-- The purge-cache service: the latest request per (worker pool, cache).
CREATE TABLE purge_cache_requests (
    worker_pool_id TEXT NOT NULL,
    cache_name     TEXT NOT NULL,
    purge_before   BIGINT NOT NULL,
    expires        BIGINT NOT NULL,
    PRIMARY KEY (worker_pool_id, cache_name)
);
CREATE INDEX purge_cache_requests_expires ON purge_cache_requests (expires);
