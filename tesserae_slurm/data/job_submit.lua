--[[
job_submit.lua for a partition scheduled by tesserae (job_submit/lua; Slurm 22.05 through 26.05).

The daemon is the only GPU arbiter of its partition: it places each job itself (NodeList plus the GPU
indices it writes into AdminComment) and starts it with `scontrol release`. A job that picks its own
node, asks Slurm for GPUs or for whole nodes would take GPUs behind the daemon's back, so in the
managed partition this script admits only jobs submitted with tsbatch (the tag in Comment) and refuses
node pinning, --exclusive and GPU requests, with a message saying why. Other partitions are untouched.

Install (see docs/daemon.md): copy next to slurm.conf, set `JobSubmitPlugins=lua` there and restart
slurmctld (or `scontrol reconfigure`). Only the job_desc fields documented for job_submit/lua that
exist from 22.05 to 26.05 are read: partition, comment, req_nodes, shared, tres_per_node (gres),
tres_per_job, tres_per_socket, tres_per_task, priority.
--]]

-- The managed partition (slurm.partition in the daemon's config).
local MANAGED_PARTITION = "tesserae"
-- The tag tsbatch writes at the start of Comment (tesserae_slurm/tsbatch/meta.py, PREFIX).
local TAG = "tesserae:v1:"

local NO_VAL16 = 65534

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

local function refuse(text)
    slurm.log_user("partition %s is scheduled by tesserae: %s", MANAGED_PARTITION, text)
    return slurm.ERROR
end

-- What no job in the managed partition may ask for; nil when it asks for none of it. A node list set
-- later (scontrol update) is not checked: the daemon sets NodeList itself at every placement.
local function forbidden(desc, at_submit)
    if at_submit and desc.req_nodes ~= nil and desc.req_nodes ~= "" then
        return "choosing nodes (-w/--nodelist) is not allowed; tesserae places jobs itself"
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
    return slurm.SUCCESS
end

slurm.log_info("tesserae job_submit.lua loaded (managed partition %s)", MANAGED_PARTITION)
return slurm.SUCCESS
