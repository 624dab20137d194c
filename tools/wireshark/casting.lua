-- casting.lua: a Wireshark / tshark dissector for the casting protocol
-- (walcast's reliable ordered UDP with WAL retransmit).
--
-- Every datagram on UDP and every record on the TCP replay stream is one
-- or more frames: a 16-byte header (version, record type, payload length,
-- CRC-32C of the payload) followed by the payload. The layouts are those
-- of package wire (github.com/walcast/walcast/wire) and docs/protocol.md;
-- this file decodes all of them:
--
--   any other type  data record: seq (first u64 of the payload), then the
--                   application's bytes
--   0x0006          CaughtUp (TCP server -> client)
--   0x0010          Status (receiver -> sender, walcast)
--   0x0011          NAK (with the receiver id of a group NAK)
--   0x0012          Heartbeat, or walcast's probe (timestamp, sender id, RTT)
--   0x0013          ReplicationRequest (TCP client -> server)
--   0x0014          bitmap NAK (reserved; no layout yet)
--   0x0015          ReplicationNotAvailable (TCP server -> client)
--   0x0016          session end (walcast)
--   0x0017          Skip marker (walcast)
--
-- A UDP datagram of a keyed endpoint (cast send/recv -key-file,
-- docs/auth.md) ends in a 34-byte authentication trailer after its last
-- frame: epoch, counter, key id, version and a 16-byte AES-128-GMAC tag.
-- It is shown with its fields; the tag is not verified (the key is not
-- known to Wireshark). Preference "Authentication trailers" (on) finds
-- one where the frames end exactly 34 bytes before the datagram does and
-- byte 17 of what follows is version 1.
--
-- Install: copy this file into Wireshark's personal Lua plugins folder
-- (Help > About Wireshark > Folders > "Personal Lua Plugins", on Linux
-- ~/.local/lib/wireshark/plugins/), or load it for one run with
--   tshark -X lua_script:tools/wireshark/casting.lua -r capture.pcap
-- Ports: Edit > Preferences > Protocols > CASTING (UDP ports, default
-- 9000; TCP replay port, default 7400), or on the command line
--   -o casting.udp_ports:9000,9001 -o casting.tcp_port:7400
-- A heuristic dissector also claims UDP datagrams on other ports whose
-- first frame has version 1 and a matching CRC-32C ("casting_udp" in
-- Analyze > Enabled Protocols).
--
-- Problems are reported as expert info (a bad CRC, a frame shorter than
-- its header or than its length field, an unknown version, a payload too
-- short for its record type), never as a Lua error.
--
-- Written for the Lua 5.2 of Wireshark 4.0 and later (bit32 or bit).

local bitlib = bit32 or bit
local band, bxor, rshift = bitlib.band, bitlib.bxor, bitlib.rshift

local HEADER = 16
local TRAILER = 34

local p_cast = Proto("casting", "casting protocol (walcast)")

----------------------------------------------------------------------
-- CRC-32C (Castagnoli), table-driven: reflected polynomial 0x82F63B78,
-- initial value and final XOR 0xFFFFFFFF. Check value "123456789" ->
-- 0xE3069283.
----------------------------------------------------------------------
local crc_table = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if band(c, 1) ~= 0 then
            c = bxor(rshift(c, 1), 0x82F63B78)
        else
            c = rshift(c, 1)
        end
    end
    crc_table[i] = c
end

-- crc32c of len bytes of tvb from offset.
local function crc32c(tvb, offset, len)
    local crc = 0xFFFFFFFF
    if len > 0 then
        local s = tvb:raw(offset, len)
        for i = 1, len do
            crc = bxor(crc_table[band(bxor(crc, s:byte(i)), 0xFF)], rshift(crc, 8))
        end
    end
    return bxor(crc, 0xFFFFFFFF)
end

----------------------------------------------------------------------
-- Fields
----------------------------------------------------------------------
local type_names = {
    [0x0006] = "CaughtUp",
    [0x0010] = "Status",
    [0x0011] = "NAK",
    [0x0012] = "Heartbeat",
    [0x0013] = "ReplicationRequest",
    [0x0014] = "Bitmap NAK (reserved)",
    [0x0015] = "ReplicationNotAvailable",
    [0x0016] = "Session end",
    [0x0017] = "Skip",
}

local state_names = { [0] = "live", [1] = "faulted", [2] = "reconnect", [3] = "sender restarted" }
local skip_reasons = { [1] = "restart (never durable: drop delivered copies)", [2] = "repair (damaged, quarantined)" }

local f = {
    frame      = ProtoField.bytes("casting.frame", "Frame", base.NONE),
    version    = ProtoField.uint8("casting.version", "Version", base.DEC),
    pad0       = ProtoField.uint8("casting.pad0", "Pad", base.HEX),
    rtype      = ProtoField.uint16("casting.type", "Record type", base.HEX),
    rname      = ProtoField.string("casting.type_name", "Record"),
    len        = ProtoField.uint16("casting.len", "Payload length", base.DEC),
    pad1       = ProtoField.uint16("casting.pad1", "Pad", base.HEX),
    crc        = ProtoField.uint32("casting.crc", "CRC-32C", base.HEX),
    crc_ok     = ProtoField.bool("casting.crc_ok", "CRC-32C good"),
    reserved   = ProtoField.uint32("casting.reserved", "Reserved", base.HEX),
    payload    = ProtoField.bytes("casting.payload", "Payload", base.NONE),

    seq        = ProtoField.uint64("casting.seq", "Seq", base.DEC),
    data       = ProtoField.bytes("casting.data", "Data", base.NONE),

    st_delivered = ProtoField.uint64("casting.status.delivered", "Delivered", base.DEC),
    st_highest   = ProtoField.uint64("casting.status.highest", "Highest", base.DEC),
    st_receiver  = ProtoField.uint64("casting.status.receiver_id", "Receiver id", base.HEX),
    st_echo_ts   = ProtoField.uint64("casting.status.echo_ts", "Echo TS (ns, sender's clock)", base.DEC),
    st_echo_hold = ProtoField.uint32("casting.status.echo_hold", "Echo hold (ns)", base.DEC),
    st_window    = ProtoField.uint32("casting.status.window", "Window", base.DEC),
    st_renak     = ProtoField.uint32("casting.status.renak_ns", "Re-NAK delay (ns)", base.DEC),
    st_serial    = ProtoField.uint32("casting.status.serial", "Serial", base.DEC),
    st_state     = ProtoField.uint8("casting.status.state", "State", base.DEC, state_names),
    st_flags     = ProtoField.uint8("casting.status.flags", "Flags", base.HEX),
    st_synced    = ProtoField.bool("casting.status.synced", "Synced", 8, nil, 0x01),
    st_closing   = ProtoField.bool("casting.status.closing", "Closing", 8, nil, 0x02),

    nak_from     = ProtoField.uint64("casting.nak.from", "From seq", base.DEC),
    nak_count    = ProtoField.uint64("casting.nak.count", "Count", base.DEC),
    nak_receiver = ProtoField.uint64("casting.nak.receiver_id", "Receiver id (group NAK; 0: reference NAK)", base.HEX),

    hb_highest   = ProtoField.uint64("casting.hb.highest", "Highest seq sent", base.DEC),
    hb_ts        = ProtoField.uint64("casting.hb.ts", "Probe TS (ns; 0: plain heartbeat)", base.DEC),
    hb_sender    = ProtoField.uint64("casting.hb.sender_id", "Sender id", base.HEX),
    hb_srtt      = ProtoField.uint32("casting.hb.srtt_ns", "Smoothed RTT (ns)", base.DEC),
    hb_rttvar    = ProtoField.uint32("casting.hb.rttvar_ns", "RTT variation (ns)", base.DEC),

    rr_stream    = ProtoField.uint32("casting.rr.stream", "Stream", base.DEC),
    rr_from      = ProtoField.uint64("casting.rr.from", "From seq (0: oldest)", base.DEC),
    rr_flags     = ProtoField.uint32("casting.rr.flags", "Flags", base.HEX),
    rr_ext       = ProtoField.bool("casting.rr.replay_ext", "ReplayExt (Skip records, Damaged)", 32, nil, 0x1),

    na_requested = ProtoField.uint64("casting.na.requested", "Requested from seq", base.DEC),
    na_oldest    = ProtoField.uint64("casting.na.oldest", "Oldest held", base.DEC),
    na_highest   = ProtoField.uint64("casting.na.highest", "Highest held", base.DEC),
    na_stream    = ProtoField.uint32("casting.na.stream", "Stream", base.DEC),
    na_damaged   = ProtoField.uint64("casting.na.damaged", "Damaged at seq (0: not damaged)", base.DEC),

    end_slot     = ProtoField.uint64("casting.end.seq_slot", "Seq slot (always 0)", base.DEC),
    end_final    = ProtoField.uint64("casting.end.final", "Final seq", base.DEC),
    end_sender   = ProtoField.uint64("casting.end.sender_id", "Sender id", base.HEX),

    skip_from    = ProtoField.uint64("casting.skip.from", "From seq", base.DEC),
    skip_reason  = ProtoField.uint32("casting.skip.reason", "Reason", base.DEC, skip_reasons),

    cu_seq       = ProtoField.uint64("casting.caughtup.seq", "Seq (always 0)", base.DEC),
    cu_ts        = ProtoField.uint64("casting.caughtup.ts_ns", "Server time (ns since epoch)", base.DEC),
    cu_stream    = ProtoField.uint32("casting.caughtup.stream", "Stream", base.DEC),
    cu_live      = ProtoField.uint64("casting.caughtup.live_seq", "Live seq", base.DEC),

    auth          = ProtoField.bytes("casting.auth", "Authentication trailer", base.NONE),
    auth_epoch    = ProtoField.uint64("casting.auth.epoch", "Epoch", base.HEX),
    auth_start    = ProtoField.uint32("casting.auth.epoch_start", "Epoch start (Unix seconds)", base.DEC),
    auth_counter  = ProtoField.uint64("casting.auth.counter", "Counter", base.DEC),
    auth_key      = ProtoField.uint8("casting.auth.key_id", "Key id", base.DEC),
    auth_version  = ProtoField.uint8("casting.auth.version", "Trailer version", base.DEC),
    auth_tag      = ProtoField.bytes("casting.auth.tag", "Tag (AES-128-GMAC)", base.NONE),
    auth_verified = ProtoField.bool("casting.auth.verified", "Tag verified (never: the key is not known to Wireshark)"),
}
local field_list = {}
for _, v in pairs(f) do field_list[#field_list + 1] = v end
p_cast.fields = field_list

local e = {
    short     = ProtoExpert.new("casting.short", "Frame shorter than its 16-byte header", expert.group.MALFORMED, expert.severity.ERROR),
    truncated = ProtoExpert.new("casting.truncated", "Payload length exceeds the bytes present", expert.group.MALFORMED, expert.severity.ERROR),
    version   = ProtoExpert.new("casting.bad_version", "Unknown header version (only 1 exists)", expert.group.MALFORMED, expert.severity.ERROR),
    crc       = ProtoExpert.new("casting.bad_crc", "Payload CRC-32C mismatch", expert.group.CHECKSUM, expert.severity.ERROR),
    payload   = ProtoExpert.new("casting.short_payload", "Payload too short for its record type", expert.group.MALFORMED, expert.severity.ERROR),
    noseq     = ProtoExpert.new("casting.seq_zero", "Data record with seq 0 (receivers drop it)", expert.group.PROTOCOL, expert.severity.WARN),
    reserved  = ProtoExpert.new("casting.reserved_type", "Reserved record type with no layout", expert.group.UNDECODED, expert.severity.NOTE),
}
p_cast.experts = { e.short, e.truncated, e.version, e.crc, e.payload, e.noseq, e.reserved }

p_cast.prefs.udp_ports = Pref.range("UDP ports", "9000", "UDP ports carrying casting datagrams (data, NAK, Status, heartbeats)", 65535)
p_cast.prefs.tcp_port = Pref.uint("TCP replay port", 7400, "TCP port of the replay server (cast replay serve; 0: none)")
p_cast.prefs.auth = Pref.bool("Authentication trailers", true, "Decode the 34-byte trailer of keyed endpoints (docs/auth.md) after a datagram's last frame")

----------------------------------------------------------------------
-- Payloads
----------------------------------------------------------------------

-- need reports (and returns false) when the payload is shorter than n.
local function need(pl, plen, n, item)
    if plen < n then
        item:add_proto_expert_info(e.payload, string.format("Payload too short for its record type: %d bytes; need %d", plen, n))
        return false
    end
    return true
end

local function u64(tvb, off) return tvb(off, 8):le_uint64() end

-- Each decoder adds its fields to tree and returns a summary for the
-- Info column.
local decoders = {}

decoders[0x0010] = function(tvb, off, plen, tree, item)
    if not need(tvb, plen, 64, item) then return "Status (short)" end
    tree:add_le(f.st_delivered, tvb(off, 8))
    tree:add_le(f.st_highest, tvb(off + 8, 8))
    tree:add_le(f.st_receiver, tvb(off + 16, 8))
    tree:add_le(f.st_echo_ts, tvb(off + 24, 8))
    tree:add_le(f.st_echo_hold, tvb(off + 32, 4))
    tree:add_le(f.st_window, tvb(off + 36, 4))
    tree:add_le(f.st_renak, tvb(off + 40, 4))
    tree:add_le(f.st_serial, tvb(off + 44, 4))
    tree:add(f.st_state, tvb(off + 48, 1))
    local ft = tree:add(f.st_flags, tvb(off + 49, 1))
    ft:add(f.st_synced, tvb(off + 49, 1))
    ft:add(f.st_closing, tvb(off + 49, 1))
    return string.format("Status delivered=%s window=%d serial=%d state=%s",
        tostring(u64(tvb, off)), tvb(off + 36, 4):le_uint(), tvb(off + 44, 4):le_uint(),
        state_names[tvb(off + 48, 1):uint()] or tostring(tvb(off + 48, 1):uint()))
end

decoders[0x0011] = function(tvb, off, plen, tree, item)
    if not need(tvb, plen, 64, item) then return "NAK (short)" end
    tree:add_le(f.nak_from, tvb(off, 8))
    tree:add_le(f.nak_count, tvb(off + 8, 8))
    tree:add_le(f.nak_receiver, tvb(off + 16, 8))
    return string.format("NAK from=%s count=%s", tostring(u64(tvb, off)), tostring(u64(tvb, off + 8)))
end

decoders[0x0012] = function(tvb, off, plen, tree, item)
    if not need(tvb, plen, 64, item) then return "Heartbeat (short)" end
    tree:add_le(f.hb_highest, tvb(off, 8))
    tree:add_le(f.hb_ts, tvb(off + 8, 8))
    tree:add_le(f.hb_sender, tvb(off + 16, 8))
    tree:add_le(f.hb_srtt, tvb(off + 24, 4))
    tree:add_le(f.hb_rttvar, tvb(off + 28, 4))
    local kind = "Heartbeat"
    if u64(tvb, off + 8) ~= UInt64(0) then kind = "Probe" end
    return string.format("%s highest=%s", kind, tostring(u64(tvb, off)))
end

decoders[0x0013] = function(tvb, off, plen, tree, item)
    if not need(tvb, plen, 64, item) then return "ReplicationRequest (short)" end
    tree:add_le(f.rr_stream, tvb(off, 4))
    tree:add_le(f.rr_from, tvb(off + 8, 8))
    local ft = tree:add_le(f.rr_flags, tvb(off + 16, 4))
    ft:add_le(f.rr_ext, tvb(off + 16, 4))
    return string.format("ReplicationRequest stream=%d from=%s", tvb(off, 4):le_uint(), tostring(u64(tvb, off + 8)))
end

decoders[0x0014] = function(tvb, off, plen, tree, item)
    item:add_proto_expert_info(e.reserved)
    return "Bitmap NAK (reserved)"
end

decoders[0x0015] = function(tvb, off, plen, tree, item)
    if not need(tvb, plen, 64, item) then return "ReplicationNotAvailable (short)" end
    tree:add_le(f.na_requested, tvb(off, 8))
    tree:add_le(f.na_oldest, tvb(off + 8, 8))
    tree:add_le(f.na_highest, tvb(off + 16, 8))
    tree:add_le(f.na_stream, tvb(off + 24, 4))
    tree:add_le(f.na_damaged, tvb(off + 32, 8))
    return string.format("NotAvailable stream=%d requested=%s oldest=%s highest=%s", tvb(off + 24, 4):le_uint(),
        tostring(u64(tvb, off)), tostring(u64(tvb, off + 8)), tostring(u64(tvb, off + 16)))
end

decoders[0x0016] = function(tvb, off, plen, tree, item)
    if not need(tvb, plen, 64, item) then return "Session end (short)" end
    tree:add_le(f.end_slot, tvb(off, 8))
    tree:add_le(f.end_final, tvb(off + 8, 8))
    tree:add_le(f.end_sender, tvb(off + 16, 8))
    return string.format("Session end final=%s", tostring(u64(tvb, off + 8)))
end

decoders[0x0017] = function(tvb, off, plen, tree, item)
    if not need(tvb, plen, 64, item) then return "Skip (short)" end
    tree:add_le(f.seq, tvb(off, 8))
    tree:add_le(f.skip_from, tvb(off + 8, 8))
    tree:add_le(f.skip_reason, tvb(off + 16, 4))
    return string.format("Skip seq=%s from=%s", tostring(u64(tvb, off)), tostring(u64(tvb, off + 8)))
end

local function caught_up(tvb, off, plen, tree, item)
    if not need(tvb, plen, 128, item) then return "CaughtUp (short)" end
    tree:add_le(f.cu_seq, tvb(off, 8))
    tree:add_le(f.cu_ts, tvb(off + 8, 8))
    tree:add_le(f.cu_stream, tvb(off + 16, 4))
    tree:add_le(f.cu_live, tvb(off + 24, 8))
    return string.format("CaughtUp stream=%d live=%s", tvb(off + 16, 4):le_uint(), tostring(u64(tvb, off + 24)))
end

local function data_record(tvb, off, plen, tree, item, rtype)
    if not need(tvb, plen, 8, item) then return string.format("Data type=%d (short)", rtype) end
    local si = tree:add_le(f.seq, tvb(off, 8))
    local seq = u64(tvb, off)
    if seq == UInt64(0) then si:add_proto_expert_info(e.noseq) end
    if plen > 8 then tree:add(f.data, tvb(off + 8, plen - 8)) end
    return string.format("Data type=%d seq=%s", rtype, tostring(seq))
end

----------------------------------------------------------------------
-- Frames
----------------------------------------------------------------------

-- dissect_frame decodes the frame at off (avail bytes are there) and
-- returns its size in bytes (the rest of the buffer when it cannot be
-- walked further) and its Info summary.
local function dissect_frame(tvb, off, avail, tree, tcp)
    if avail < HEADER then
        local it = tree:add(p_cast, tvb(off, avail), "casting, truncated frame")
        it:add_proto_expert_info(e.short)
        return avail, "Truncated frame"
    end
    local version = tvb(off, 1):uint()
    local rtype = tvb(off + 2, 2):le_uint()
    local plen = tvb(off + 4, 2):le_uint()
    local size = HEADER + plen
    local whole = size <= avail
    if not whole then size = avail end
    local name = type_names[rtype]
    if rtype == 0x0006 and not tcp then name = nil end -- 6 is CaughtUp only on the replay stream
    local label = name or "Data"

    local it = tree:add(p_cast, tvb(off, size), string.format("casting %s (type 0x%04x, %d-byte payload)", label, rtype, plen))
    local hdr = it:add(f.version, tvb(off, 1))
    if version ~= 1 then hdr:add_proto_expert_info(e.version) end
    it:add(f.pad0, tvb(off + 1, 1))
    it:add_le(f.rtype, tvb(off + 2, 2))
    it:add(f.rname, tvb(off + 2, 2), label)
    local li = it:add_le(f.len, tvb(off + 4, 2))
    it:add_le(f.pad1, tvb(off + 6, 2))
    local ci = it:add_le(f.crc, tvb(off + 8, 4))
    it:add_le(f.reserved, tvb(off + 12, 4))
    if not whole then
        li:add_proto_expert_info(e.truncated, string.format("Payload length %d exceeds the %d bytes present", plen, avail - HEADER))
        return size, label .. " (truncated)"
    end
    local want = tvb(off + 8, 4):le_uint()
    local got = crc32c(tvb, off + HEADER, plen)
    local good = got == want
    it:add(f.crc_ok, tvb(off + 8, 4), good)
    if not good then
        ci:add_proto_expert_info(e.crc, string.format("Payload CRC-32C mismatch: header 0x%08x; payload 0x%08x", want, got))
    end
    local info
    local pl = it
    if plen > 0 then
        pl = it:add(f.payload, tvb(off + HEADER, plen))
    end
    local po = off + HEADER
    if rtype == 0x0006 and tcp then
        info = caught_up(tvb, po, plen, pl, it)
    elseif decoders[rtype] then
        info = decoders[rtype](tvb, po, plen, pl, it)
    else
        info = data_record(tvb, po, plen, pl, it, rtype)
    end
    if not good then info = info .. " [bad CRC]" end
    if version ~= 1 then info = info .. " [bad version]" end
    return size, info
end

-- trailer_at is where a UDP datagram's authentication trailer begins
-- (nil: it has none): its frames, walked by their length fields, end
-- exactly TRAILER bytes before the datagram does, and byte 17 of what
-- follows is trailer version 1. Those 34 bytes are a frame instead when
-- they are one whole frame with a good CRC-32C.
local function trailer_at(tvb)
    local total = tvb:len()
    local t = total - TRAILER
    if not p_cast.prefs.auth or t < HEADER or tvb(t + 17, 1):uint() ~= 1 then return nil end
    local off = 0
    while off + HEADER <= t do
        off = off + HEADER + tvb(off + 4, 2):le_uint()
    end
    if off ~= t then return nil end
    if tvb(t, 1):uint() == 1 and tvb(t + 4, 2):le_uint() == TRAILER - HEADER and
        crc32c(tvb, t + HEADER, TRAILER - HEADER) == tvb(t + 8, 4):le_uint() then
        return nil
    end
    return t
end

-- dissect_trailer shows the authentication trailer at off.
local function dissect_trailer(tvb, off, tree)
    local it = tree:add(p_cast, tvb(off, TRAILER), "casting authentication trailer (tag not verified: the key is not known to Wireshark)")
    it:add(f.auth, tvb(off, TRAILER))
    local ep = it:add_le(f.auth_epoch, tvb(off, 8))
    ep:add_le(f.auth_start, tvb(off + 4, 4))
    it:add_le(f.auth_counter, tvb(off + 8, 8))
    it:add(f.auth_key, tvb(off + 16, 1))
    it:add(f.auth_version, tvb(off + 17, 1))
    it:add(f.auth_tag, tvb(off + 18, 16))
    it:add(f.auth_verified, tvb(off + 18, 16), false)
    return string.format("auth key %d counter %s (not verified)", tvb(off + 16, 1):uint(), tostring(u64(tvb, off + 8)))
end

-- dissect_frames walks every frame of a buffer (a datagram may carry
-- several consecutive frames when the sender coalesces), then a UDP
-- datagram's authentication trailer.
local function dissect_frames(tvb, pinfo, tree, tcp)
    local total = tvb:len()
    local auth = nil
    if not tcp then auth = trailer_at(tvb) end
    local off, infos, stop = 0, {}, auth or total
    while off < stop do
        local size, info = dissect_frame(tvb, off, stop - off, tree, tcp)
        infos[#infos + 1] = info
        off = off + size
    end
    local tag = nil
    if auth then tag = dissect_trailer(tvb, auth, tree) end
    pinfo.cols.protocol = "CASTING"
    local s = table.concat(infos, "; ")
    if #infos > 1 then s = string.format("%d frames: %s", #infos, s) end
    if tag then s = s .. " [" .. tag .. "]" end
    return s
end

-- UDP: one datagram, any number of frames.
local function dissect_udp(tvb, pinfo, tree)
    local s = dissect_frames(tvb, pinfo, tree, false)
    pinfo.cols.info:set(s)
    return tvb:len()
end

-- TCP: frames reassembled across segments with dissect_tcp_pdus.
local function tcp_pdu_len(tvb, pinfo, off)
    return HEADER + tvb(off + 4, 2):le_uint()
end

-- One PDU is one frame; a segment holding several appends each summary.
local function dissect_tcp_pdu(tvb, pinfo, tree)
    local s = dissect_frames(tvb, pinfo, tree, true)
    pinfo.cols.info:append(s .. "; ")
    return tvb:len()
end

local function dissect_tcp(tvb, pinfo, tree)
    pinfo.cols.protocol = "CASTING"
    pinfo.cols.info:clear()
    dissect_tcp_pdus(tvb, tree, HEADER, tcp_pdu_len, dissect_tcp_pdu, true)
    return tvb:len()
end

local p_tcp = Proto("casting_tcp", "casting replay stream (TCP)")
p_tcp.dissector = dissect_tcp

function p_cast.dissector(tvb, pinfo, tree)
    return dissect_udp(tvb, pinfo, tree)
end

-- Heuristic: the first frame has version 1, fits the datagram and its
-- CRC-32C matches.
local function heur_udp(tvb, pinfo, tree)
    local n = tvb:len()
    if n < HEADER or tvb(0, 1):uint() ~= 1 then return false end
    local plen = tvb(4, 2):le_uint()
    if HEADER + plen > n then return false end
    if crc32c(tvb, HEADER, plen) ~= tvb(8, 4):le_uint() then return false end
    dissect_udp(tvb, pinfo, tree)
    return true
end
p_cast:register_heuristic("udp", heur_udp)

----------------------------------------------------------------------
-- Ports
----------------------------------------------------------------------
local udp_table = DissectorTable.get("udp.port")
local tcp_table = DissectorTable.get("tcp.port")
local cur_udp, cur_tcp = nil, nil

local function register_ports()
    if cur_udp then udp_table:remove(cur_udp, p_cast) end
    if cur_tcp and cur_tcp ~= 0 then tcp_table:remove(cur_tcp, p_tcp) end
    cur_udp = p_cast.prefs.udp_ports
    cur_tcp = p_cast.prefs.tcp_port
    if cur_udp and cur_udp ~= "" then udp_table:add(cur_udp, p_cast) end
    if cur_tcp ~= 0 then tcp_table:add(cur_tcp, p_tcp) end
end

function p_cast.prefs_changed()
    register_ports()
end

register_ports()
