-- Argo CD health of a warmgate.dev SpecDecodeDeployment: the meaning of warmgate's Flux
-- healthCheckExprs (deploy/gitops/flux/healthcheckexprs.yaml) and of kstatus.
--   Healthy      Ready is True for the current generation: status.observedGeneration and the
--                Ready condition's observedGeneration both equal metadata.generation
--   Degraded     Stalled is True (a refused spec or plan, a failed or timed-out warmup, a
--                rollout past its deadline, a name someone else owns): nothing moves until
--                the spec changes
--   Progressing  anything else: no status yet (the operator has not seen the object), a
--                generation the operator has not observed, planning, a warmup that waits or
--                runs, serving that rolls out, or the last verified plan serving while a new
--                one warms
-- Uses only Lua's base library (as a resource.customizations.health script without
-- useOpenLibs runs).
local hs = {}
local generation = obj.metadata.generation
if obj.status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the warmgate operator to write a status"
  return hs
end
local observed = obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed ~= generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for the warmgate operator to observe generation " .. generation
  return hs
end
local ready = nil
local stalled = nil
local reconciling = nil
if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    if condition.type == "Ready" then
      ready = condition
    elseif condition.type == "Stalled" then
      stalled = condition
    elseif condition.type == "Reconciling" then
      reconciling = condition
    end
  end
end
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = stalled.reason .. ": " .. (stalled.message or "")
  return hs
end
if ready ~= nil and ready.status == "True" and ready.observedGeneration == generation then
  hs.status = "Healthy"
  hs.message = ready.message or ""
  return hs
end
hs.status = "Progressing"
if reconciling ~= nil and reconciling.status == "True" then
  hs.message = reconciling.reason .. ": " .. (reconciling.message or "")
elseif ready ~= nil then
  hs.message = ready.reason .. ": " .. (ready.message or "")
else
  hs.message = "Waiting for the Ready condition"
end
return hs
