-- The operator's day (issue 29), continued.
--
-- A worker's capacity: the most tasks it asked for in one claimWork since
-- it came online (an idle worker asks for all its slots), so the console
-- and /metrics can set its busy slots against it. 0: not known yet.
ALTER TABLE workers ADD COLUMN capacity INTEGER NOT NULL DEFAULT 0;

-- The anonymous role of a deployment created before this version lacks
-- hopper:list-tasks (the task history, GET /api/hopper/v1/tasks), which
-- the role hopper creates now grants. hopper creates that role once and
-- never rewrites it at startup; this upgrade, run once, gives today's
-- default scopes (server.DefaultAnonymousScopes, in its order) to a role
-- that is still exactly as an earlier hopper created it: one of the
-- default lists of earlier versions, in hopper's order, which no Auth API
-- update can store (updates store scopes sorted). A role the operator
-- changed is left as it is. The change is in the audit log, made by
-- static/hopper/upgrade, and the roles version moves so that every
-- replica reads the roles again.
CREATE TEMPORARY TABLE former_anonymous_scopes (scopes TEXT NOT NULL);
INSERT INTO former_anonymous_scopes (scopes) VALUES
    ('["auth:current-scopes","auth:expand-scopes","auth:get-client:*","auth:get-role:*","auth:list-clients","auth:list-roles","queue:get-artifact:public/*","queue:get-provisioner:*","queue:get-task:*","queue:get-task-queue:*","queue:get-worker:*","queue:get-worker-type:*","queue:list-artifacts:*","queue:list-dependent-tasks:*","queue:list-provisioners","queue:list-task-group:*","queue:list-task-queues","queue:list-worker-types:*","queue:list-workers:*","queue:pending-count:*","queue:claimed-count:*","queue:status:*"]'),
    ('["auth:current-scopes","auth:expand-scopes","auth:get-client:*","auth:get-role:*","auth:list-clients","auth:list-roles","queue:get-artifact:public/*","queue:get-provisioner:*","queue:get-task:*","queue:get-task-queue:*","queue:get-worker:*","queue:get-worker-type:*","queue:list-artifacts:*","queue:list-dependent-tasks:*","queue:list-provisioners","queue:list-task-group:*","queue:list-task-queues","queue:list-worker-types:*","queue:list-workers:*","queue:pending-count:*","queue:claimed-count:*","queue:status:*","queue:pending-list:*","queue:claimed-list:*"]'),
    ('["auth:current-scopes","auth:expand-scopes","auth:get-client:*","auth:get-role:*","auth:list-clients","auth:list-roles","queue:get-artifact:public/*","queue:get-provisioner:*","queue:get-task:*","queue:get-task-queue:*","queue:get-worker:*","queue:get-worker-type:*","queue:list-artifacts:*","queue:list-dependent-tasks:*","queue:list-provisioners","queue:list-task-group:*","queue:list-task-queues","queue:list-worker-types:*","queue:list-workers:*","queue:pending-count:*","queue:claimed-count:*","queue:status:*","queue:pending-list:*","queue:claimed-list:*","index:find-task:*","index:list-namespaces:*","index:list-tasks:*"]'),
    ('["auth:current-scopes","auth:expand-scopes","auth:get-client:*","auth:get-role:*","auth:list-clients","auth:list-roles","queue:get-artifact:public/*","queue:get-provisioner:*","queue:get-task:*","queue:get-task-queue:*","queue:get-worker:*","queue:get-worker-type:*","queue:list-artifacts:*","queue:list-dependent-tasks:*","queue:list-provisioners","queue:list-task-group:*","queue:list-task-queues","queue:list-worker-types:*","queue:list-workers:*","queue:pending-count:*","queue:claimed-count:*","queue:status:*","queue:pending-list:*","queue:claimed-list:*","purge-cache:purge-requests:*"]'),
    ('["auth:current-scopes","auth:expand-scopes","auth:get-client:*","auth:get-role:*","auth:list-clients","auth:list-roles","queue:get-artifact:public/*","queue:get-provisioner:*","queue:get-task:*","queue:get-task-queue:*","queue:get-worker:*","queue:get-worker-type:*","queue:list-artifacts:*","queue:list-dependent-tasks:*","queue:list-provisioners","queue:list-task-group:*","queue:list-task-queues","queue:list-worker-types:*","queue:list-workers:*","queue:pending-count:*","queue:claimed-count:*","queue:status:*","queue:pending-list:*","queue:claimed-list:*","index:find-task:*","index:list-namespaces:*","index:list-tasks:*","purge-cache:purge-requests:*"]');
INSERT INTO audit_history (entity_type, entity_id, client_id, action_type, created)
    SELECT 'role', 'anonymous', 'static/hopper/upgrade', 'updated', (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT
    FROM roles WHERE role_id = 'anonymous' AND scopes IN (SELECT scopes FROM former_anonymous_scopes);
UPDATE meta SET value = value + 1 WHERE name = 'roles_version'
    AND EXISTS (SELECT 1 FROM roles WHERE role_id = 'anonymous' AND scopes IN (SELECT scopes FROM former_anonymous_scopes));
UPDATE roles SET
    scopes = '["auth:current-scopes","auth:expand-scopes","auth:get-client:*","auth:get-role:*","auth:list-clients","auth:list-roles","queue:get-artifact:public/*","queue:get-provisioner:*","queue:get-task:*","queue:get-task-queue:*","queue:get-worker:*","queue:get-worker-type:*","queue:list-artifacts:*","queue:list-dependent-tasks:*","queue:list-provisioners","queue:list-task-group:*","queue:list-task-queues","queue:list-worker-types:*","queue:list-workers:*","queue:pending-count:*","queue:claimed-count:*","queue:status:*","queue:pending-list:*","queue:claimed-list:*","index:find-task:*","index:list-namespaces:*","index:list-tasks:*","purge-cache:purge-requests:*","hopper:list-tasks"]',
    last_modified = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT
    WHERE role_id = 'anonymous' AND scopes IN (SELECT scopes FROM former_anonymous_scopes);
DROP TABLE former_anonymous_scopes;
