-- A task's flow policy is stored in its row, as createTask parsed it from
-- the definition's extra.flow block, so reading the task never parses the
-- block again (store/flow.go, flowColumn): flow is
-- limit<<3 | failFast<<2 | cancelInProgress<<1 | supersede, NULL for a
-- task without a flow block; the key is flow_key (007).
ALTER TABLE tasks ADD COLUMN flow BIGINT;

-- Tasks already stored get what queue.ParseFlow gives for their block,
-- computed here with its rules: extra's last member named exactly "flow"
-- (a Go map keeps the last), read only when extra's text has "flow"
-- literally (ParseFlow's shortcut); the block's members matched as Go
-- matches struct fields, ignoring case (ASCII, and the Kelvin sign and
-- long s, which fold to k and s), the last of a name winning; any unknown
-- member or member of the wrong type, a limit outside 1..10000, a key
-- without a policy, or a block declaring nothing leaves NULL (ParseFlow
-- refuses it; createTask never stored one). A keyed policy takes its key
-- from flow_key (where createTask put it, from the block or the
-- coalesce.v1 route); a keyed block in a row without one (a task created
-- before 007, whose block the claims have always treated as inert) is
-- left NULL, as the claims treated it.
CREATE TEMP TABLE flow_054_blocks AS
SELECT task_id, flow_key, block FROM (
    SELECT t.task_id, t.flow_key,
        (SELECT CASE WHEN e.type = 'object' THEN e.value END FROM json_each(t.definition, '$.extra') e
         WHERE e.key = 'flow' ORDER BY e.id DESC LIMIT 1) AS block
    FROM tasks t
    WHERE t.definition LIKE '%"flow"%' AND json_type(t.definition, '$.extra') = 'object'
        AND instr(json_extract(t.definition, '$.extra'), '"flow"') > 0)
WHERE block IS NOT NULL;

CREATE TEMP TABLE flow_054_members AS
SELECT b.task_id, m.id, replace(replace(lower(m.key), char(8490), 'k'), char(383), 's') AS name, m.type,
    CASE WHEN m.type = 'integer' AND typeof(m.value) = 'integer' THEN m.value END AS n
FROM flow_054_blocks b, json_each(b.block) m;

CREATE TEMP TABLE flow_054_policies AS
SELECT b.task_id, b.flow_key,
    EXISTS (SELECT 1 FROM flow_054_members m WHERE m.task_id = b.task_id AND NOT (
        m.name IN ('key', 'limit', 'supersede', 'cancelinprogress', 'failfast') AND (m.type = 'null'
            OR (m.name = 'key' AND m.type = 'text')
            OR (m.name = 'limit' AND m.n IS NOT NULL)
            OR (m.name IN ('supersede', 'cancelinprogress', 'failfast') AND m.type IN ('true', 'false'))))) AS bad,
    ifnull((SELECT m.type = 'text' FROM flow_054_members m WHERE m.task_id = b.task_id AND m.name = 'key'
        ORDER BY m.id DESC LIMIT 1), 0) AS has_key,
    (SELECT m.n FROM flow_054_members m WHERE m.task_id = b.task_id AND m.name = 'limit'
        ORDER BY m.id DESC LIMIT 1) AS lim,
    ifnull((SELECT m.type = 'true' FROM flow_054_members m WHERE m.task_id = b.task_id AND m.name = 'supersede'
        ORDER BY m.id DESC LIMIT 1), 0) AS supersede,
    ifnull((SELECT m.type = 'true' FROM flow_054_members m WHERE m.task_id = b.task_id AND m.name = 'cancelinprogress'
        ORDER BY m.id DESC LIMIT 1), 0) AS cancel_in_progress,
    ifnull((SELECT m.type = 'true' FROM flow_054_members m WHERE m.task_id = b.task_id AND m.name = 'failfast'
        ORDER BY m.id DESC LIMIT 1), 0) AS fail_fast
FROM flow_054_blocks b;

UPDATE tasks SET flow = (
    SELECT ifnull(p.lim, 0) * 8 + p.fail_fast * 4 + p.cancel_in_progress * 2 + p.supersede
    FROM flow_054_policies p WHERE p.task_id = tasks.task_id)
WHERE task_id IN (
    SELECT p.task_id FROM flow_054_policies p
    WHERE NOT p.bad AND (p.lim IS NULL OR p.lim BETWEEN 1 AND 10000)
        AND CASE WHEN p.lim IS NOT NULL OR p.supersede OR p.cancel_in_progress
            THEN p.flow_key IS NOT NULL
            ELSE p.fail_fast AND NOT p.has_key END);

DROP TABLE flow_054_policies;
DROP TABLE flow_054_members;
DROP TABLE flow_054_blocks;
