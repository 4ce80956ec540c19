-- hopper_assert fails the statement, and so its transaction, when ok is
-- false. A batch of creates uses it to check its own outcome inside the
-- statement that writes it, so the batch can be sent with its COMMIT.
CREATE FUNCTION hopper_assert(ok boolean, message text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT ok THEN
        RAISE EXCEPTION '%', message USING ERRCODE = 'P0001';
    END IF;
    RETURN true;
END
$$;
