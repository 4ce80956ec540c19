-- A task's flow policy is stored in its row, as createTask parsed it from
-- the definition's extra.flow block, so reading the task never parses the
-- block again (store/flow.go, flowColumn): flow is
-- limit<<3 | failFast<<2 | cancelInProgress<<1 | supersede, NULL for a
-- task without a flow block (most tasks: nothing is written for them);
-- the key is flow_key (007).
ALTER TABLE tasks ADD COLUMN flow BIGINT;

-- Tasks already stored get what queue.ParseFlow gives for their block,
-- computed with its rules (definition is TEXT: read as json, which keeps
-- members in order, duplicates included, and numbers as written):
-- extra's last member named exactly "flow" (a Go map keeps the last),
-- read only when extra's text has "flow" literally (ParseFlow's
-- shortcut); the block's members matched as Go matches struct fields,
-- ignoring case (ASCII, and the Kelvin sign and long s, which fold to k
-- and s; translate, not lower, whose other foldings depend on the
-- locale), the last of a name winning; any unknown member or member of
-- the wrong type, a limit outside 1..10000, a key without a policy, or a
-- block declaring nothing gives NULL (ParseFlow refuses it; createTask
-- never stored one). A keyed policy takes its key from flow_key (where
-- createTask put it, from the block or the coalesce.v1 route); a keyed
-- block in a row without one (a task created before 007, whose block the
-- claims have always treated as inert) is left NULL, as the claims
-- treated it.
CREATE FUNCTION hopper_flow_054(definition TEXT, flow_key TEXT) RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    extra json;
    block json;
    bad boolean;
    key_type text;
    lim_type text;
    lim_text text;
    lim numeric;
    supersede boolean;
    cancel_in_progress boolean;
    fail_fast boolean;
BEGIN
    -- PostgreSQL cannot unescape \u0000 or a lone surrogate in a string,
    -- where Go reads U+0000 and U+FFFD: they are replaced by \ufffd
    -- first, which changes no member name this compares.
    extra := regexp_replace(replace(definition, '\u0000', '\ufffd'),
        '\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}',
        '\\ufffd', 'g')::json -> 'extra';
    IF json_typeof(extra) IS DISTINCT FROM 'object' OR strpos(extra::text, '"flow"') = 0 THEN
        RETURN NULL;
    END IF;
    block := extra -> 'flow';
    IF json_typeof(block) IS DISTINCT FROM 'object' THEN
        RETURN NULL;
    END IF;
    SELECT coalesce(bool_or(NOT (
            m.name IN ('key', 'limit', 'supersede', 'cancelinprogress', 'failfast') AND (m.type = 'null'
                OR (m.name = 'key' AND m.type = 'string')
                OR (m.name = 'limit' AND m.type = 'number' AND m.txt ~ '^-?[0-9]+$'
                    AND m.txt::numeric BETWEEN -9223372036854775808 AND 9223372036854775807)
                OR (m.name IN ('supersede', 'cancelinprogress', 'failfast') AND m.type = 'boolean')))), false),
        (array_agg(m.type ORDER BY m.n DESC) FILTER (WHERE m.name = 'key'))[1],
        (array_agg(m.type ORDER BY m.n DESC) FILTER (WHERE m.name = 'limit'))[1],
        (array_agg(m.txt ORDER BY m.n DESC) FILTER (WHERE m.name = 'limit'))[1],
        coalesce((array_agg(m.txt ORDER BY m.n DESC) FILTER (WHERE m.name = 'supersede'))[1] = 'true', false),
        coalesce((array_agg(m.txt ORDER BY m.n DESC) FILTER (WHERE m.name = 'cancelinprogress'))[1] = 'true', false),
        coalesce((array_agg(m.txt ORDER BY m.n DESC) FILTER (WHERE m.name = 'failfast'))[1] = 'true', false)
    INTO bad, key_type, lim_type, lim_text, supersede, cancel_in_progress, fail_fast
    FROM (SELECT e.n, translate(e.k, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ' || chr(8490) || chr(383), 'abcdefghijklmnopqrstuvwxyzks') AS name,
            json_typeof(e.v) AS type, e.v::text AS txt
        FROM json_each(block) WITH ORDINALITY AS e(k, v, n)) m;
    IF bad THEN
        RETURN NULL;
    END IF;
    IF lim_type = 'number' THEN
        lim := lim_text::numeric;
    END IF;
    IF lim IS NOT NULL AND (lim < 1 OR lim > 10000) THEN
        RETURN NULL;
    END IF;
    IF lim IS NOT NULL OR supersede OR cancel_in_progress THEN
        IF flow_key IS NULL THEN
            RETURN NULL;
        END IF;
    ELSIF key_type = 'string' OR NOT fail_fast THEN
        RETURN NULL;
    END IF;
    RETURN coalesce(lim, 0)::bigint * 8 + fail_fast::int * 4 + cancel_in_progress::int * 2 + supersede::int;
EXCEPTION
    -- Anything else PostgreSQL's json cannot read leaves the row NULL
    -- rather than stopping the upgrade.
    WHEN untranslatable_character OR invalid_text_representation OR character_not_in_repertoire THEN
        RETURN NULL;
END
$$;

UPDATE tasks SET flow = p.flow
FROM (SELECT task_id, hopper_flow_054(definition, flow_key) AS flow FROM tasks WHERE definition LIKE '%"flow"%') p
WHERE tasks.task_id = p.task_id AND p.flow IS NOT NULL;

DROP FUNCTION hopper_flow_054(TEXT, TEXT);
