--[[
job_submit.lua for a partition scheduled by tesserae (job_submit/lua; Slurm 22.05 through 26.05).

The daemon is the only GPU arbiter of its partition: it places each job itself (NodeList plus the GPU
indices it writes into AdminComment) and starts it with `scontrol release`. A job that picks its own
node, asks Slurm for GPUs or for whole nodes would take GPUs behind the daemon's back, so in the
managed partition this script admits only jobs submitted with tsbatch (the tag in Comment) and refuses
node pinning, --exclusive and GPU requests, with a message saying why. Other partitions are untouched.

Once a managed job is queued, only an operator (OPERATORS below: root, SlurmUser, the daemon's user) may
lift its hold or change what the daemon relies on: its owner's `scontrol release`, `update Nice=` on a
held job (with priority/basic that gives it a priority: it starts without the daemon), Requeue=0 (a
preemption could no longer requeue it), node lists and counts, dependencies, features, reservations
and, while it runs, its metadata are refused. What stays open to its owner cannot start it or move it:
docs/daemon.md ("job_submit.lua") lists both and why.

Install (see docs/daemon.md): copy next to slurm.conf, set `JobSubmitPlugins=lua` there and restart
slurmctld (or `scontrol reconfigure`). Only the job_desc fields documented for job_submit/lua that
exist from 22.05 to 26.05 are read: partition, comment, req_nodes, exc_nodes, min_nodes, max_nodes,
shared, tres_per_node (gres), tres_per_job, tres_per_socket, tres_per_task, priority, nice, requeue,
dependency, features, reservation; of the job record: partition, comment, priority. Lua 5.1.
--]]

-- The managed partition (slurm.partition in the daemon's config).
local MANAGED_PARTITION = "tesserae"
-- The tag tsbatch writes at the start of Comment (tesserae_slurm/model/meta.py, PREFIX).
local TAG = "tesserae:v1:"

-- Who may release managed jobs and change their placement: user names (looked up in /etc/passwd when
-- the script loads) or numeric uids. Root is always one. Add SlurmUser if it is not `slurm`, the
-- daemon's user if it is not `tesserae`, and a uid for a user that is not in /etc/passwd (LDAP). Slurm's own operator list (sacctmgr
-- AdminLevel) is not visible here: an operator not listed counts as an ordinary user for managed jobs.
local OPERATORS = { "root", "slurm", "tesserae" }

local NO_VAL = 4294967294
local NO_VAL16 = 65534

local function operator_uids(entries)
    local uids, wanted = { [0] = true }, {}
    for _, entry in ipairs(entries) do
        if type(entry) == "number" then
            uids[entry] = true
        else
            wanted[entry] = true
        end
    end
    local passwd = io.open("/etc/passwd", "r")
    if passwd ~= nil then
        for line in passwd:lines() do
            local name, uid = string.match(line, "^([^:]*):[^:]*:(%d+):")
            if name ~= nil and wanted[name] then
                uids[tonumber(uid)] = true
                wanted[name] = nil
            end
        end
        passwd:close()
    end
    for name, _ in pairs(wanted) do
        slurm.log_info("tesserae job_submit.lua: operator %s is not in /etc/passwd (give its uid if it exists)", name)
    end
    return uids
end

local OPERATOR_UIDS = operator_uids(OPERATORS)

local function split_partitions(text)
    local names = {}
    for name in string.gmatch(text or "", "[^,]+") do
        names[#names + 1] = name
    end
    return names
end

-- Is the job headed for the managed partition? Without -p it goes to the default partition.
local function targets_managed(partition, part_list)
    if partition == nil or partition == "" then
        for _, part in pairs(part_list or {}) do
            if part.name == MANAGED_PARTITION and part.flag_default == 1 then
                return true
            end
        end
        return false
    end
    for _, name in ipairs(split_partitions(partition)) do
        if name == MANAGED_PARTITION then
            return true
        end
    end
    return false
end

local function tagged(comment)
    return comment ~= nil and string.sub(comment, 1, #TAG) == TAG
end

local function asks_gpus(desc)
    for _, field in ipairs({ "tres_per_node", "tres_per_job", "tres_per_socket", "tres_per_task" }) do
        local value = desc[field]
        if value ~= nil and (string.find(value, "gpu", 1, true) or string.find(value, "shard", 1, true)
                             or string.find(value, "mps", 1, true)) then
            return true
        end
    end
    return false
end

local function given(value, unset)
    return value ~= nil and value ~= unset and value ~= ""
end

local function refuse(text)
    slurm.log_user("partition %s is scheduled by tesserae: %s", MANAGED_PARTITION, text)
    return slurm.ERROR
end

-- What no job in the managed partition may ask for, whoever asks; nil when it asks for none of it.
local function forbidden(desc, at_submit)
    if at_submit and given(desc.req_nodes) then
        return "choosing nodes (-w/--nodelist) is not allowed; tesserae places jobs itself"
    end
    if desc.requeue == 0 then
        return "a managed job must stay requeueable (preemption requeues it); do not use --no-requeue/Requeue=0"
    end
    if desc.shared ~= nil and desc.shared ~= NO_VAL16 and desc.shared ~= 1 then
        return "--exclusive is not allowed; tesserae assigns GPUs, not whole nodes"
    end
    if asks_gpus(desc) then
        return "GPU requests (--gres=gpu/shard/mps, --gpus*) are not allowed; submit with tsbatch --gpus N"
    end
    return nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
    if not targets_managed(job_desc.partition, part_list) then
        return slurm.SUCCESS
    end
    if not tagged(job_desc.comment) then
        return refuse("submit jobs with tsbatch (this job has no tesserae tag in its Comment)")
    end
    local why = forbidden(job_desc, true)
    if why ~= nil then
        return refuse(why)
    end
    -- Managed jobs start only when the daemon releases them: hold one submitted without --hold.
    job_desc.priority = 0
    return slurm.SUCCESS
end

-- What only an operator may change in a managed job, once queued; nil when the update touches none of
-- it. `held`: the job is held now (priority 0), so Slurm will not start it unless the hold is lifted.
local function operators_only(desc, held)
    if given(desc.priority, NO_VAL) and desc.priority ~= 0 then
        return "only an operator can release or reprioritize a managed job; tesserae starts it"
    end
    if held and given(desc.nice, NO_VAL) then
        return "Nice of a held job would give it a priority and start it; submit with tsbatch --nice"
    end
    if given(desc.req_nodes) or given(desc.exc_nodes) or given(desc.min_nodes, NO_VAL)
            or given(desc.max_nodes, NO_VAL) then
        return "node lists and counts are not allowed; tesserae places jobs itself"
    end
    if given(desc.features) or given(desc.reservation) or given(desc.dependency) then
        return "features, reservations and dependencies are not allowed; tesserae decides where and when jobs run"
    end
    if not held and desc.comment ~= nil then
        return "the tesserae metadata (Comment) can change only while the job is held"
    end
    return nil
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
    local managed = job_rec.partition ~= nil and targets_managed(job_rec.partition, part_list)
    local into = job_desc.partition ~= nil and targets_managed(job_desc.partition, part_list)
    if not managed and not into then
        return slurm.SUCCESS
    end
    if job_desc.comment ~= nil and not tagged(job_desc.comment) then
        return refuse("a managed job keeps its tesserae tag in Comment")
    end
    if into and not managed and not tagged(job_desc.comment or job_rec.comment) then
        return refuse("only jobs submitted with tsbatch may move into this partition")
    end
    local why = forbidden(job_desc, false)
    if why ~= nil then
        return refuse(why)
    end
    if OPERATOR_UIDS[modify_uid] then
        return slurm.SUCCESS
    end
    local held = job_rec.priority == 0
    if into and not managed and not held then
        return refuse("a job moves into this partition only while held (scontrol hold first)")
    end
    why = operators_only(job_desc, held)
    if why ~= nil then
        return refuse(why)
    end
    return slurm.SUCCESS
end

slurm.log_info("tesserae job_submit.lua loaded (managed partition %s)", MANAGED_PARTITION)
return slurm.SUCCESS
