package compiler

import "github.com/probectl/probectl/compiler/compiled"

// What the compiler outputs is defined in package compiled, which is free
// of spec and HCL so that runtime, metrics and a saved plan need neither.
// The compiler's code and Compile's callers spell those names here, as
// aliases: each means exactly its compiled namesake.

// The compiled types.
type (
	Action          = compiled.Action
	Aggregation     = compiled.Aggregation
	AggregationKind = compiled.AggregationKind
	Change          = compiled.Change
	Description     = compiled.Description
	EntryData       = compiled.EntryData
	Estimate        = compiled.Estimate
	EventBuffer     = compiled.EventBuffer
	EventLayout     = compiled.EventLayout
	EventLayoutID   = compiled.EventLayoutID
	EventsChange    = compiled.EventsChange
	Family          = compiled.Family
	FamilyInfo      = compiled.FamilyInfo
	KeyField        = compiled.KeyField
	KeyKind         = compiled.KeyKind
	Map             = compiled.Map
	Output          = compiled.Output
	Scope           = compiled.Scope
	Plan            = compiled.Plan
	PlanMap         = compiled.PlanMap
	PlanProgram     = compiled.PlanProgram
	PlanTarget      = compiled.PlanTarget
	Probe           = compiled.Probe
	Program         = compiled.Program
	Role            = compiled.Role
	Route           = compiled.Route
	Skipped         = compiled.Skipped
	Stats           = compiled.Stats
	Storage         = compiled.Storage
	Summary         = compiled.Summary
	Table           = compiled.Table
	TableChange     = compiled.TableChange
)

// The compiled constants.
const (
	EventLayoutOffset        = compiled.EventLayoutOffset
	EventTimeOffset          = compiled.EventTimeOffset
	EventHeaderSize          = compiled.EventHeaderSize
	RingbufHeaderSize        = compiled.RingbufHeaderSize
	TableData                = compiled.TableData
	TableStats               = compiled.TableStats
	ActionCreate             = compiled.ActionCreate
	ActionReplace            = compiled.ActionReplace
	ActionDelete             = compiled.ActionDelete
	ActionNoOp               = compiled.ActionNoOp
	AggCount                 = compiled.AggCount
	AggSum                   = compiled.AggSum
	AggMin                   = compiled.AggMin
	AggMax                   = compiled.AggMax
	AggHist                  = compiled.AggHist
	AggLHist                 = compiled.AggLHist
	FamilyKprobeMulti        = compiled.FamilyKprobeMulti
	FamilyKretprobeMulti     = compiled.FamilyKretprobeMulti
	FamilyKprobeSession      = compiled.FamilyKprobeSession
	FamilyFentry             = compiled.FamilyFentry
	FamilyFexit              = compiled.FamilyFexit
	FamilyFsession           = compiled.FamilyFsession
	FamilyKprobe             = compiled.FamilyKprobe
	FamilyKretprobe          = compiled.FamilyKretprobe
	FamilyUprobeMulti        = compiled.FamilyUprobeMulti
	FamilyUretprobeMulti     = compiled.FamilyUretprobeMulti
	FamilyUprobeSession      = compiled.FamilyUprobeSession
	FamilyUprobe             = compiled.FamilyUprobe
	FamilyUretprobe          = compiled.FamilyUretprobe
	FamilyTracepoint         = compiled.FamilyTracepoint
	FamilyRawTracepoint      = compiled.FamilyRawTracepoint
	FamilyTPBtf              = compiled.FamilyTPBtf
	FamilyPerfEvent          = compiled.FamilyPerfEvent
	MaxKprobeMulti           = compiled.MaxKprobeMulti
	MaxUprobeMulti           = compiled.MaxUprobeMulti
	AttachTraceUprobeSession = compiled.AttachTraceUprobeSession
	KeyInt                   = compiled.KeyInt
	KeyUint                  = compiled.KeyUint
	KeyFunc                  = compiled.KeyFunc
	KeyEvent                 = compiled.KeyEvent
	KeyComm                  = compiled.KeyComm
	KeyString                = compiled.KeyString
	KeyBytes                 = compiled.KeyBytes
	KeyArgv                  = compiled.KeyArgv
	KeyPath                  = compiled.KeyPath
	KeyBuf                   = compiled.KeyBuf
	KeyKStack                = compiled.KeyKStack
	KeyUStack                = compiled.KeyUStack
	RoleEntry                = compiled.RoleEntry
	RoleExit                 = compiled.RoleExit
	RoleSession              = compiled.RoleSession
	RoleEvent                = compiled.RoleEvent
	RoleSample               = compiled.RoleSample
	RouteFtrace              = compiled.RouteFtrace
	RouteFgraph              = compiled.RouteFgraph
	RouteRethook             = compiled.RouteRethook
	RouteTrampoline          = compiled.RouteTrampoline
	RouteKprobe              = compiled.RouteKprobe
	RouteUprobe              = compiled.RouteUprobe
	RouteTracepoint          = compiled.RouteTracepoint
	RouteRawTracepoint       = compiled.RouteRawTracepoint
	RouteTPBtf               = compiled.RouteTPBtf
	RouteProfile             = compiled.RouteProfile
	StorageNone              = compiled.StorageNone
	StorageCookie            = compiled.StorageCookie
	StorageMap               = compiled.StorageMap
	License                  = compiled.License
	PlanFormatVersion        = compiled.PlanFormatVersion
)

// EventBufferAddress is compiled.EventBufferAddress.
var EventBufferAddress = compiled.EventBufferAddress

// JoinFamilies is compiled.JoinFamilies.
func JoinFamilies(fams []Family) string { return compiled.JoinFamilies(fams) }

// Families is compiled.Families.
func Families() []FamilyInfo { return compiled.Families() }

// Multi is compiled.Multi.
func Multi(family Family) bool { return compiled.Multi(family) }

// ProgramKey is compiled.ProgramKey.
func ProgramKey(prog *Program, function string) string { return compiled.ProgramKey(prog, function) }

// StackFrameSize is compiled.StackFrameSize.
func StackFrameSize(user bool) int { return compiled.StackFrameSize(user) }

// ParseEventLayoutID is compiled.ParseEventLayoutID.
func ParseEventLayoutID(s string) (EventLayoutID, error) { return compiled.ParseEventLayoutID(s) }

// NewEventsChange is compiled.NewEventsChange.
func NewEventsChange(b EventBuffer, action Action, why string) *EventsChange {
	return compiled.NewEventsChange(b, action, why)
}

// NewPlan is compiled.NewPlan.
func NewPlan(out *Output) *Plan { return compiled.NewPlan(out) }

// LinearBuckets is compiled.LinearBuckets.
func LinearBuckets(min, max, step int64) int64 { return compiled.LinearBuckets(min, max, step) }

// fmtMS writes a time in milliseconds as plans show it.
func fmtMS(ms float64) string { return compiled.MSText(ms) }
